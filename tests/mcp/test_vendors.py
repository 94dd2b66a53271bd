"""An MCP server's tools declared and answered on each vendor: its input schemas, cleaned of
what is for people, become the declarations' parameters."""

from __future__ import annotations

import json
from typing import Any

import livebridge
from livebridge import LiveSession
from livebridge.emulator import Emulator, RuleModel
from livebridge.protocol.events import ToolCallSettled, TurnComplete
from tests.mcp.test_stdio import server
from tests.support.gemini_sessions import client_messages, collect_until, of_type, open_session

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def registry() -> livebridge.ToolRegistry:
    tools = livebridge.ToolRegistry()
    tools.add_mcp(server(), include=["lookup", "describe"], prefix="mcp_")
    return tools


async def test_gemini_declares_the_input_schemas() -> None:
    tools = registry()
    async with (
        Emulator(RuleModel(by_description=True)) as emu,
        open_session(emu, tools) as session,
    ):
        await session.send_text("Weather in Oslo?")
        events = await collect_until(session, lambda e: isinstance(e, TurnComplete))
    (setup,) = client_messages(emu, "setup")
    declared = {
        d["name"]: d for tool in setup["tools"] for d in tool.get("functionDeclarations", [])
    }
    assert set(declared) == {"mcp_lookup", "mcp_describe"}
    assert declared["mcp_lookup"]["parametersJsonSchema"] == CITY
    assert declared["mcp_lookup"]["description"] == "Weather for a city."
    assert [(e.name, e.outcome) for e in of_type(events, ToolCallSettled)] == [("mcp_lookup", "ok")]
    assert emu.violations == []


async def test_openai_realtime_declares_the_input_schemas_and_gets_the_outputs() -> None:
    tools = registry()
    async with (
        Emulator(RuleModel(by_description=True), protocol="openai") as emu,
        LiveSession.connect(
            emu.openai_client(),
            model="gpt-realtime",
            tools=tools,
            config={"output_modalities": ["text"]},
        ) as session,
    ):
        await session.send_text("Weather in Oslo and Lima?")
        events = await collect_until(
            session, lambda e: isinstance(e, TurnComplete) and e.reason == "completed"
        )
    client = [e.message for e in emu.transcript if e.direction == "client"]
    (update,) = [m for m in client if m.get("type") == "session.update"]
    declared = {tool["name"]: tool for tool in update["session"]["tools"]}
    assert set(declared) == {"mcp_lookup", "mcp_describe"}
    assert declared["mcp_lookup"]["parameters"] == CITY
    outputs: list[Any] = [
        json.loads(m["item"]["output"])
        for m in client
        if m.get("type") == "conversation.item.create"
        and m["item"].get("type") == "function_call_output"
    ]
    assert outputs == [{"output": {"city": city, "sky": "sunny"}} for city in ("Oslo", "Lima")]
    assert [e.outcome for e in of_type(events, ToolCallSettled)] == ["ok", "ok"]
    assert emu.violations == []
