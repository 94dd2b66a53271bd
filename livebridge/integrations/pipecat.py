"""Pipecat: a registry's tools registered on an LLM service, each call run through livebridge.

Pipecat hands each function call to a handler with ``FunctionCallParams`` and sends what the
handler passes to ``result_callback`` (once per call). Here the handler submits the call to one
``Dispatcher``: a raising tool, a timeout or a call past the limits answers livebridge's
structured error (not Pipecat's "failed and returned no result"), a call the model re-issues
under a new id while the first runs runs once, and observers see every call. Pipecat's own
timeout is set past livebridge's, so livebridge answers first; an interruption cancels the
handler's task, which cancels the call (settled ``cancelled``).

Pipecat's Gemini Live service reads no ``toolCallCancellation``: the calls the server cancels
run on and are answered. On that service ``attach`` has the message cancel them through
Pipecat's own path for cancelling a call by id: the handler's task is cancelled, the call
settles ``cancelled``, and nothing is answered. Beside the public handler API these are the
only Pipecat internals used, and only on versions they were checked against (``SUPPORTED``):
another version raises ``UsageError`` naming the range.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import metadata
from typing import Any

from livebridge.calls.call import Call
from livebridge.calls.dispatch import ABANDON_GRACE, Dispatcher
from livebridge.calls.observers import Observer
from livebridge.calls.policy import CallPolicy
from livebridge.calls.tools import ToolRegistry
from livebridge.errors import UsageError

__all__ = ["SUPPORTED", "attach", "tools_schema"]

#: The Pipecat releases (``major.minor``, inclusive) whose function-call API this was checked on.
SUPPORTED = ((1, 14), (1, 14))
#: Seconds Pipecat's own timeout waits past livebridge's, so that livebridge answers first.
_PIPECAT_TIMEOUT_MARGIN = 2.0


def _check_version() -> str:
    try:
        version = metadata.version("pipecat-ai")
    except metadata.PackageNotFoundError:
        raise UsageError(
            "livebridge.integrations.pipecat needs Pipecat: pip install 'livebridge-voice[pipecat]'"
        ) from None
    try:
        release = tuple(int(part) for part in version.split(".")[:2])
    except ValueError:
        release = (0, 0)
    low, high = SUPPORTED
    if not low <= release <= high:
        supported = (
            f"{low[0]}.{low[1]}" if low == high else f"{low[0]}.{low[1]}-{high[0]}.{high[1]}"
        )
        raise UsageError(
            f"livebridge.integrations.pipecat supports pipecat-ai {supported}, not {version}: "
            f"pip install 'pipecat-ai=={low[0]}.{low[1]}.*'"
        )
    return version


def tools_schema(registry: ToolRegistry) -> Any:
    """The Pipecat ``ToolsSchema`` declaring every tool of ``registry`` (for ``LLMContext``)."""
    _check_version()
    from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
    from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema

    schemas = []
    for tool in registry:
        parameters = tool.parameters_json_schema
        schemas.append(
            FunctionSchema(
                name=tool.name,
                description=tool.description or "",
                properties=dict(parameters.get("properties", {})),
                required=list(parameters.get("required", [])),
            )
        )
    return ToolsSchema(standard_tools=schemas)


def attach(
    llm: Any,
    registry: ToolRegistry,
    *,
    policy: CallPolicy | None = None,
    observers: Iterable[Observer] = (),
) -> Dispatcher:
    """Register every tool of ``registry`` on the Pipecat LLM service ``llm``; returns the
    ``Dispatcher`` its calls run on (one per service, as a session owns one)."""
    _check_version()
    dispatcher = Dispatcher(registry, policy=policy, observers=observers)

    async def handler(params: Any) -> None:
        arguments = params.arguments
        args = dict(arguments) if isinstance(arguments, dict) else arguments
        call = Call(str(params.tool_call_id), params.function_name, args)
        outcome = await dispatcher.submit(call)
        await params.result_callback(outcome.response)

    for tool in registry:
        limit = (tool.timeout or dispatcher.policy.timeout) + ABANDON_GRACE
        llm.register_function(
            tool.name,
            handler,
            cancel_on_interruption=True,
            timeout_secs=limit + _PIPECAT_TIMEOUT_MARGIN,
        )
    if any(kind.__name__ == "GeminiLiveLLMService" for kind in type(llm).__mro__):
        _follow_cancellations(llm)
    return dispatcher


def _follow_cancellations(llm: Any) -> None:
    """Have Gemini Live's ``toolCallCancellation`` cancel the calls it names, as Pipecat
    cancels a call by id (its task cancelled, settled in the context, no answer sent)."""
    receive = getattr(llm, "_handle_server_message", None)
    cancel = getattr(llm, "_cancel_function_calls_by_tool_call_id", None)
    if receive is None or cancel is None:
        raise UsageError(
            f"livebridge.integrations.pipecat: {type(llm).__name__} reads its server's "
            "messages in a way this version does not know; no toolCallCancellation would reach "
            "the calls"
        )

    async def handle(message: Any) -> None:
        cancellation = getattr(message, "tool_call_cancellation", None)
        for call_id in getattr(cancellation, "ids", None) or ():
            await cancel(call_id)
        await receive(message)

    llm._handle_server_message = handle
