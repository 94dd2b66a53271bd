"""The OpenAI Agents SDK: every tool of a registry as an ``agents.FunctionTool``.

The SDK hands each call to ``FunctionTool.on_invoke_tool(ctx, json_args)`` on its own and sends
whatever string comes back. Here that string is livebridge's answer: the call runs through one
``Dispatcher`` shared by the tools made together, so bad JSON, a raising tool, a timeout and a
call past the fan-out limit come back as livebridge's structured errors (never the SDK's text,
never an exception that ends the run), a call the model re-issues runs once, and observers
(``livebridge.observe.metrics``) see every call.

The calls of one model response are one turn (twins, ``max_calls_per_turn``) when the model
reports one request per response in its usage, as the SDK's OpenAI models do; otherwise each
call is a turn of its own.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from livebridge.calls.call import Call, UnreadableArguments
from livebridge.calls.dispatch import Dispatcher
from livebridge.calls.observers import Observer
from livebridge.calls.payloads import json_text
from livebridge.calls.policy import CallPolicy
from livebridge.calls.tools import ToolRegistry
from livebridge.errors import UsageError

if TYPE_CHECKING:
    import agents

__all__ = ["function_tools"]

#: How many model responses the turn numbering remembers.
_RESPONSES_KEPT = 64


class _Turns:
    """Numbers model responses: a run's usage object and its request count name one."""

    def __init__(self) -> None:
        self._numbers: OrderedDict[tuple[int, int], tuple[Any, int]] = OrderedDict()
        self._next = 1

    def of(self, ctx: Any) -> int | None:
        usage = getattr(ctx, "usage", None)
        requests = getattr(usage, "requests", 0)
        if not isinstance(requests, int) or requests < 1:
            return None  # no count of responses: each call is a turn of its own
        key = (id(usage), requests)
        known = self._numbers.get(key)
        if known is not None:
            return known[1]
        number, self._next = self._next, self._next + 1
        self._numbers[key] = (usage, number)  # held: its id is not reused while remembered
        if len(self._numbers) > _RESPONSES_KEPT:
            self._numbers.popitem(last=False)
        return number


def _arguments(json_args: str) -> Any:
    if not json_args.strip():
        return {}
    try:
        return json.loads(json_args)
    except (ValueError, RecursionError) as exc:
        return UnreadableArguments(f"the arguments are not valid JSON: {exc}")


def function_tools(
    registry: ToolRegistry,
    *,
    policy: CallPolicy | None = None,
    observers: Iterable[Observer] = (),
) -> list[agents.FunctionTool]:
    """One ``FunctionTool`` per tool of ``registry``, for ``Agent`` or ``RealtimeAgent(tools=...)``.

    Raises ``UsageError`` when the SDK is not installed (the ``openai-agents`` extra).
    They share one ``Dispatcher`` (``policy``, ``observers``): make them once per conversation,
    as a session would own one. Each returns livebridge's answer as JSON text:
    ``{"output": ...}`` or ``{"error": {"type": ..., "message": ..., "retryable": ...}}``.
    """
    try:
        import agents
    except ImportError as exc:
        raise UsageError(
            "livebridge.integrations.openai_agents needs the OpenAI Agents SDK: "
            "pip install 'livebridge-voice[openai-agents]'"
        ) from exc
    dispatcher = Dispatcher(registry, policy=policy, observers=observers)
    turns = _Turns()

    def invoker(name: str) -> Any:
        async def on_invoke_tool(ctx: Any, json_args: str) -> str:
            call_id = getattr(ctx, "tool_call_id", None) or f"{name}-{id(ctx)}"
            call = Call(call_id, name, _arguments(json_args))
            outcome = await dispatcher.submit(call, turn=turns.of(ctx))
            return json_text(outcome.response)

        return on_invoke_tool

    return [
        agents.FunctionTool(
            name=tool.name,
            description=tool.description or "",
            params_json_schema=tool.parameters_json_schema,
            on_invoke_tool=invoker(tool.name),
            strict_json_schema=False,  # livebridge validates the arguments itself
        )
        for tool in registry
    ]
