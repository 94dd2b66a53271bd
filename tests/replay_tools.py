"""The demo's tools as module attributes, for ``livebridge replay FILE tests.replay_tools:ATTR``."""

from __future__ import annotations

from typing import Any

from livebridge import ToolRegistry
from livebridge.demo import FAST_PACE
from livebridge.demo.script import DemoTools

__all__ = ["broken", "broken_weather", "demo_tools", "registry", "replaced"]


def demo_tools() -> ToolRegistry:
    """The demo's tools at the ``--fast`` pace the shipped recording was made with."""
    return DemoTools(FAST_PACE).registry


def broken_weather() -> ToolRegistry:
    """The demo's tools with ``get_weather`` raising instead of answering."""
    tools = demo_tools()

    async def get_weather(city: str, day: str = "today") -> dict[str, Any]:
        """Weather for a city."""
        raise RuntimeError(f"weather backend unreachable for {city}")

    return replaced(tools, get_weather, timeout=2.0, idempotent=True)


def replaced(tools: ToolRegistry, handler: Any, **options: Any) -> ToolRegistry:
    """``tools`` with the tool of ``handler``'s name replaced by ``handler``."""
    tools.remove(handler.__name__)  # the registry refuses a second tool of one name
    tools.add(handler, **options)
    return tools


registry = demo_tools()
broken = broken_weather()
