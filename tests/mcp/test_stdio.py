"""MCP tools over stdio, through real Live sessions against the emulator."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

import livebridge
from livebridge.emulator import Conversation, Emulator
from livebridge.live.events import TextOut
from livebridge.mcp import MCPServer
from tests.session_helpers import client_messages, collect_until, errors, open_session

SERVER = str(Path(__file__).with_name("server.py"))


def server(marks: Path | None = None, **options: Any) -> MCPServer:
    env = {"MCP_MARKS": str(marks)} if marks else None
    return MCPServer.stdio(sys.executable, SERVER, env=env, start_timeout=60, **options)


def answers(emu: Emulator) -> list[list[dict[str, Any]]]:
    return [m["functionResponses"] for m in client_messages(emu, "toolResponse")]


def said(text: str) -> Any:
    return lambda event: isinstance(event, TextOut) and event.text == text


async def test_parallel_calls_are_answered_in_one_message() -> None:
    tools = livebridge.ToolRegistry()
    tools.add_mcp(server(), include=["lookup", "describe", "refuse"], prefix="w_")

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        assert set(conv.declarations) == {"w_lookup", "w_describe", "w_refuse"}
        ids = await conv.tool_call(
            [
                ("w_lookup", {"city": "Oslo"}),
                ("w_lookup", {"city": "Lima"}),
                ("w_describe", {"city": "Oslo"}),
                ("w_refuse", {"city": "Oslo"}),
                ("w_lookup", {"town": "Oslo"}),
            ]
        )
        await conv.wait_answers(ids)
        await conv.say("done")
        await conv.turn_complete()

    async with Emulator(scenario) as emu, open_session(emu, tools) as session:
        await session.send_text("Weather?")
        await collect_until(session, said("done"))

    (message,) = answers(emu)
    got = [a["response"] for a in message]
    assert got[0] == {"output": {"city": "Oslo", "sky": "sunny"}}
    assert got[1] == {"output": {"city": "Lima", "sky": "sunny"}}
    assert got[2] == {"output": {"result": "Oslo is lovely"}}
    assert got[3]["error"]["type"] == "tool_error"
    assert "no forecast for Oslo" in got[3]["error"]["message"]
    assert got[4]["error"]["type"] == "invalid_arguments"
    assert errors(emu) == []
