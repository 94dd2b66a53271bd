"""The emulator's rule model calls an MCP server's tools by their descriptions."""

from __future__ import annotations

from typing import Any

import livebridge
from livebridge.emulator import Emulator, RuleModel
from livebridge.protocol.events import ToolCallSettled, TurnComplete
from tests.mcp.test_stdio import server
from tests.support.gemini_sessions import collect_until, of_type, open_session


async def test_the_rule_model_calls_the_tool_the_turn_describes() -> None:
    tools = livebridge.ToolRegistry()
    tools.add_mcp(server(), exclude=["crash"])  # lookup, describe, hang, refuse take a city
    async with (
        Emulator(RuleModel(by_description=True)) as emu,
        open_session(emu, tools) as session,
    ):
        await session.send_text("What's the weather in Oslo and Lima?")
        events = await collect_until(session, lambda e: isinstance(e, TurnComplete))
        await session.send_text("A sentence about Rome?")
        events += await collect_until(session, lambda e: isinstance(e, TurnComplete))
    settled: list[Any] = [(e.name, e.ending) for e in of_type(events, ToolCallSettled)]
    assert settled == [("lookup", "ok"), ("lookup", "ok"), ("describe", "ok")]
    assert emu.violations == []
