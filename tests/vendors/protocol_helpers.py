"""What the sans-I/O protocol tests of both vendors build on: a registry and an output filter."""

from __future__ import annotations

from typing import Any

from livebridge.calls.tools import ToolRegistry
from livebridge.protocol.actions import Output


def registry(*, reminders: bool = False) -> ToolRegistry:
    """``lookup(city)``, BLOCKING; with ``reminders`` also ``remind(text)``, NON_BLOCKING."""
    tools = ToolRegistry()

    @tools.tool
    async def lookup(city: str) -> str:
        """Look a city up."""
        return city

    if reminders:

        @tools.tool(behavior="NON_BLOCKING")
        async def remind(text: str) -> str:
            """Set a reminder."""
            return text

    return tools


def of(outputs: list[Output], kind: type[Any]) -> list[Any]:
    """The outputs of type ``kind``, in order."""
    return [o for o in outputs if isinstance(o, kind)]
