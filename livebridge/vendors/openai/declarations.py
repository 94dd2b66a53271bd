"""A registry's tools as OpenAI ``function`` tools: the shape Realtime's ``session.tools`` and
GPT-Live's ``delegation.responses.tools`` both take."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from livebridge.calls.tools import Tool


def declarations(tools: Iterable[Tool]) -> list[dict[str, Any]]:
    """One ``{"type": "function", ...}`` per tool, in the registry's order."""
    return [
        {
            "type": "function",
            "name": tool.name,
            "description": tool.description or "",
            "parameters": tool.parameters_json_schema,
        }
        for tool in tools
    ]
