"""OpenAI-style encoders: Chat Completions ``tool_calls`` and Responses API ``function_call`` items.

Chat Completions gets one ``{"role": "tool", "tool_call_id": ..., "content": json}`` message per
call; the Responses API gets one ``function_call_output`` item per ``function_call`` item.
``content``/``output`` is the JSON text of the livebridge response (``{"output": ...}`` or
``{"error": {...}}``). Arguments that are not valid JSON are answered ``invalid_arguments`` saying
so (``parse_arguments``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from livebridge.calls.call import Call
from livebridge.calls.dispatch import Dispatcher
from livebridge.calls.fields import field, parse_arguments
from livebridge.calls.payloads import json_text

__all__ = [
    "answer_chat",
    "answer_responses",
]


async def answer_chat(
    tool_calls: Iterable[Any], dispatcher: Dispatcher, *, turn: int = 0
) -> list[dict[str, Any]]:
    """Run a Chat Completions message's ``tool_calls``; one ``role: "tool"`` message each."""
    calls = []
    for tool_call in tool_calls:
        function = field(tool_call, "function")
        arguments = parse_arguments(field(function, "arguments"))
        calls.append(Call(field(tool_call, "id"), field(function, "name"), arguments))
    outcomes = await dispatcher.run(calls, turn=turn)
    return [
        {"role": "tool", "tool_call_id": o.call_id, "content": json_text(o.response)}
        for o in outcomes
    ]


async def answer_responses(
    items: Iterable[Any], dispatcher: Dispatcher, *, turn: int = 0
) -> list[dict[str, Any]]:
    """Run the ``function_call`` items of a Responses API output; other items are skipped."""
    calls = [
        Call(field(item, "call_id"), field(item, "name"), parse_arguments(field(item, "arguments")))
        for item in items
        if field(item, "type") == "function_call"
    ]
    outcomes = await dispatcher.run(calls, turn=turn)
    return [
        {"type": "function_call_output", "call_id": o.call_id, "output": json_text(o.response)}
        for o in outcomes
    ]
