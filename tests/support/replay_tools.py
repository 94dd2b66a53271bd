"""The demo's tools as module attributes, for
``livebridge replay FILE tests.support.replay_tools:ATTR``, and hand-written recordings for the
replay tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from livebridge import ToolRegistry
from livebridge.demo import FAST_PACE
from livebridge.demo.script import DemoTools

__all__ = [
    "a_recording",
    "answer",
    "broken",
    "broken_clock",
    "broken_weather",
    "demo_tools",
    "registry",
    "replaced",
    "tool_call",
    "wrong_city",
]


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


def wrong_city_weather() -> ToolRegistry:
    """The demo's tools with ``get_weather`` answering for another city than asked."""
    tools = demo_tools()

    async def get_weather(city: str, day: str = "today") -> dict[str, Any]:
        """Weather for a city."""
        sky = {"Paris": "sunny", "Rome": "clear"}.get(city, "cloudy")  # as the demo's
        return {"city": "WRONG CITY", "day": day, "sky": sky, "high_c": 24}

    return replaced(tools, get_weather, timeout=2.0, idempotent=True)


def broken_clock_tools() -> ToolRegistry:
    """Only ``get_time``, raising as the hand-written error recording has it."""
    tools = ToolRegistry()

    @tools.tool(idempotent=True)
    async def get_time(city: str) -> str:
        """The local time in a city."""
        raise RuntimeError("clock backend down")

    return tools


def replaced(tools: ToolRegistry, handler: Any, **options: Any) -> ToolRegistry:
    """``tools`` with the tool of ``handler``'s name replaced by ``handler``."""
    tools.remove(handler.__name__)  # the registry refuses a second tool of one name
    tools.add(handler, **options)
    return tools


def a_recording(tmp_path: Path, *entries: dict[str, Any]) -> Path:
    """A hand-written recording: one connection holding ``entries``, closed by the client."""
    lines: list[dict[str, Any]] = [{"livebridge_recording": 2, "audio": "length"}]
    lines.append({"t": 0.0, "conn": 1, "ev": "open", "handle": None, "session_id": "s1"})
    lines += [{"t": 0.01 * n, "conn": 1, **entry} for n, entry in enumerate(entries, start=1)]
    end = max(1.0, lines[-1]["t"])  # the close comes last, as the writer's clock runs
    lines.append({"t": end, "conn": 1, "ev": "close", "by": "client", "code": 1000, "reason": ""})
    path = tmp_path / "hand.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def tool_call(*ids: str) -> dict[str, Any]:
    calls = [{"id": i, "name": "get_time", "args": {"city": "Oslo"}} for i in ids]
    return {"ev": "recv", "msg": {"toolCall": {"functionCalls": calls}}}


def answer(*ids: str) -> dict[str, Any]:
    responses = [{"id": i, "name": "get_time", "response": {"output": {}}} for i in ids]
    return {"ev": "send", "msg": {"toolResponse": {"functionResponses": responses}}}


registry = demo_tools()
broken = broken_weather()
wrong_city = wrong_city_weather()
broken_clock = broken_clock_tools()
