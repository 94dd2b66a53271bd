"""LiveKit Agents: every tool of a registry as a raw function tool for ``Agent(tools=...)``.

LiveKit parses a call's arguments, then calls the tool; what the tool returns is the output,
and a ``livekit.agents.llm.ToolError`` raised by it is an error output (``is_error``). Here each
call runs through one ``Dispatcher``: a raising tool, a timeout (LiveKit has none per call) and
a call past the limits answer livebridge's structured error, a call the model re-issues while
the first runs runs once, and observers see every call. LiveKit does not cancel a tool when
the user interrupts the speech that issued it while its response is still generating (it
waits for the tool, then answers the call the server cancelled): here the call is cancelled
then (``SpeechHandle.wait_if_not_interrupted``, ``RunContext.wait_for_playout``) and settles
``cancelled``, as it does when LiveKit cancels the tool's task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from livebridge.calls.call import Call, Outcome
from livebridge.calls.dispatch import Dispatcher
from livebridge.calls.observers import Observer
from livebridge.calls.payloads import json_text
from livebridge.calls.policy import CallPolicy
from livebridge.calls.tools import ToolRegistry
from livebridge.errors import UsageError

__all__ = ["function_tools"]


def function_tools(
    registry: ToolRegistry,
    *,
    policy: CallPolicy | None = None,
    observers: Iterable[Observer] = (),
) -> list[Any]:
    """One raw function tool per tool of ``registry``, sharing one ``Dispatcher``: make them
    once per conversation (an ``AgentSession``), as a session would own one. An answer is
    livebridge's JSON: ``{"output": ...}``, or ``{"error": {...}}`` as LiveKit's error output.
    """
    try:
        from livekit.agents import RunContext
        from livekit.agents.llm import ToolError, function_tool
    except ImportError as exc:
        raise UsageError(
            "livebridge.integrations.livekit needs LiveKit Agents: "
            "pip install 'livebridge-voice[livekit]'"
        ) from exc
    dispatcher = Dispatcher(registry, policy=policy, observers=observers)
    made: list[Any] = []
    calls = 0

    def invoker(name: str) -> Any:
        async def invoke(raw_arguments: dict[str, Any], context: Any = None) -> str:
            nonlocal calls
            calls += 1
            function_call = getattr(context, "function_call", None)
            call_id = getattr(function_call, "call_id", None) or f"{name}-{calls}"
            call = Call(call_id, name, raw_arguments)
            if getattr(context, "speech_handle", None) is None:
                outcome = await dispatcher.submit(call)
            else:
                outcome = await _unless_interrupted(dispatcher, call, context)
            answer = json_text(outcome.response)
            if "error" in outcome.response:
                raise ToolError(answer)
            return answer

        # LiveKit reads the parameters' types to pass its RunContext (``get_type_hints``).
        invoke.__annotations__ = {"raw_arguments": dict, "context": RunContext, "return": str}
        return invoke

    for tool in registry:
        schema = {
            "name": tool.name,
            "description": tool.description or "",
            "parameters": tool.parameters_json_schema,
        }
        made.append(function_tool(invoker(tool.name), raw_schema=schema))
    return made


async def _unless_interrupted(dispatcher: Dispatcher, call: Call, context: Any) -> Outcome:
    """The call's outcome; the call is cancelled (settled ``cancelled``) if the speech that
    issued it is interrupted while its generation still runs: the server cancels that
    response's calls. Once the generation is done the calls are owed answers, and a later
    barge-in (LiveKit interrupts the speech then too) leaves them running. A call waiting on
    an identical one's answer keeps waiting for it."""
    speech = context.speech_handle
    submitted = asyncio.ensure_future(dispatcher.submit(call))
    played = asyncio.ensure_future(context.wait_for_playout())  # the generation is done
    # Read when the generation ends, not when this task wakes: LiveKit marks an interrupted
    # generation done right after the interruption, maybe before this task runs again.
    owed: list[bool] = []
    played.add_done_callback(lambda _: owed.append(not speech.interrupted))
    watch = asyncio.ensure_future(speech.wait_if_not_interrupted([played]))
    try:
        await asyncio.wait((submitted, watch), return_when=asyncio.FIRST_COMPLETED)
        if not submitted.done() and speech.interrupted and owed != [True]:
            dispatcher.cancel(call.id)
        return await submitted
    except asyncio.CancelledError:  # LiveKit cancelled the tool: so is the call
        submitted.cancel()
        raise
    finally:
        watch.cancel()
        played.cancel()
        if played.done() and not played.cancelled():
            played.exception()  # no generation to wait for: nothing to watch
