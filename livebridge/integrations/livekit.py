"""LiveKit Agents: every tool of a registry as a raw function tool for ``Agent(tools=...)``.

LiveKit parses a call's arguments, then calls the tool; what the tool returns is the output,
and a ``livekit.agents.llm.ToolError`` raised by it is an error output (``is_error``). Here each
call runs through one ``Dispatcher``: a raising tool, a timeout (LiveKit has none per call) and
a call past the limits answer livebridge's structured error, a call the model re-issues while
the first runs runs once, and observers see every call. LiveKit only logs a cancelled call;
when it cancels the tool's task, the call settles ``cancelled``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from livebridge.calls.call import Call
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
            outcome = await dispatcher.submit(Call(call_id, name, raw_arguments))
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
