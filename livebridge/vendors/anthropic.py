"""Anthropic Messages encoder: ``tool_use`` blocks in, ONE user message of ``tool_result`` out.

Each ``tool_result`` holds the JSON text of the livebridge response and ``is_error: true`` when
that response is an error.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from livebridge.calls.call import Call
from livebridge.calls.dispatch import Dispatcher
from livebridge.calls.fields import field
from livebridge.calls.payloads import json_text

__all__ = [
    "answer",
]


async def answer(
    content_blocks: Iterable[Any], dispatcher: Dispatcher, *, turn: int = 0
) -> dict[str, Any]:
    """Run every ``tool_use`` block of a content list, or of a whole message (object or dict)."""
    calls = [
        Call(field(block, "id"), field(block, "name"), field(block, "input"))
        for block in _blocks(content_blocks)
        if field(block, "type") == "tool_use"
    ]
    outcomes = await dispatcher.run(calls, turn=turn)
    results: list[dict[str, Any]] = []
    for outcome in outcomes:
        result: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": outcome.call_id,
            "content": json_text(outcome.response),
        }
        if outcome.is_error:
            result["is_error"] = True
        results.append(result)
    return {"role": "user", "content": results}


def _blocks(source: Any) -> Iterable[Any]:
    if isinstance(source, dict):
        content: Iterable[Any] = source.get("content") or []
        return content
    blocks: Iterable[Any] = getattr(source, "content", None) or source
    return blocks
