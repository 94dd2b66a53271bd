"""MCP tools over streamable HTTP (the SDK's server run by uvicorn on 127.0.0.1), through real
Live sessions against the emulator."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from prometheus_client import CollectorRegistry

import livebridge
from livebridge.emulator import Conversation, Emulator, Signal
from livebridge.mcp import MCPServer
from livebridge.mcp.connection import connection_for
from livebridge.observe.metrics import PrometheusObserver
from livebridge.protocol.events import TextOut
from tests.mcp.test_stdio import wait_for_mark
from tests.support.gemini_sessions import client_messages, collect_until, errors, open_session
from tests.support.timing import seconds

SERVER = str(Path(__file__).with_name("server.py"))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@asynccontextmanager
async def http_server(port: int, marks: Path | None = None) -> AsyncIterator[None]:
    """The test server on ``port``, serving once it accepts connections; stopped on leaving."""
    env = {"MCP_MARKS": str(marks)} if marks else {}
    process = await anyio.open_process(
        [sys.executable, SERVER, "http", str(port)],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with anyio.fail_after(seconds(60)):
            while True:
                try:
                    stream = await anyio.connect_tcp("127.0.0.1", port)
                except OSError:
                    await anyio.sleep(0.05)
                    continue
                await stream.aclose()
                break
        yield
    finally:
        process.terminate()
        with anyio.CancelScope(shield=True):
            await process.wait()
            await process.aclose()


def answers(emu: Emulator) -> list[list[dict[str, Any]]]:
    return [m["functionResponses"] for m in client_messages(emu, "toolResponse")]


def said(text: str) -> Any:
    return lambda event: isinstance(event, TextOut) and event.text == text


async def test_parallel_calls_and_a_hung_one_over_http(tmp_path: Path) -> None:
    port, marks = free_port(), tmp_path / "marks"
    tools = livebridge.ToolRegistry()
    url = f"http://127.0.0.1:{port}/mcp"
    tools.add_mcp(
        MCPServer.http(url, headers={"X-Test": "1"}, start_timeout=60),
        include=["lookup", "hang"],
        prefix="kb_",
        idempotent=True,
        per_tool={"hang": {"timeout": 1.0}},
    )

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids = await conv.tool_call(
            [
                ("kb_lookup", {"city": "Oslo"}),
                ("kb_lookup", {"city": "Lima"}),
                ("kb_lookup", {"city": "Oslo"}),
                ("kb_hang", {"city": "Oslo"}),
            ]
        )
        await conv.wait_answers(ids)
        await conv.say("done")
        await conv.turn_complete()

    async with (
        http_server(port, marks),
        Emulator(scenario) as emu,
        open_session(emu, tools) as session,
    ):
        await session.send_text("Weather?")
        await collect_until(session, said("done"))
        await wait_for_mark(marks, "cancelled hang")

    (message,) = answers(emu)
    got = [a["response"] for a in message]
    assert got[0] == got[2] == {"output": {"city": "Oslo", "sky": "sunny"}}  # twins share
    assert got[1] == {"output": {"city": "Lima", "sky": "sunny"}}
    assert got[3]["error"]["type"] == "timeout"
    assert errors(emu) == []


@pytest.mark.slow
async def test_a_session_the_server_forgot_is_initialized_again() -> None:
    port = free_port()
    mcp_server = MCPServer.http(f"http://127.0.0.1:{port}/mcp", start_timeout=60)
    tools = livebridge.ToolRegistry()
    tools.add_mcp(mcp_server, include=["lookup"])
    first_answered, restarted = Signal(), Signal()  # the scenario runs on the emulator's thread

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.wait_answers(await conv.tool_call([("lookup", {"city": "Oslo"})]))
        first_answered.set()
        await restarted.wait()
        await conv.wait_answers(await conv.tool_call([("lookup", {"city": "Rome"})]))
        await conv.say("done")
        await conv.turn_complete()

    metrics = CollectorRegistry()
    observers = [PrometheusObserver(metrics)]
    first = AsyncExitStack()
    await first.enter_async_context(http_server(port))
    async with Emulator(scenario) as emu, open_session(emu, tools, observers=observers) as session:
        await session.send_text("Weather?")
        await first_answered.wait()
        await first.aclose()
        async with http_server(port):  # a new process: it knows no session
            restarted.set()
            await collect_until(session, said("done"))
            reconnects = connection_for(mcp_server).reconnects
            await session.aclose()

    (oslo,), (rome,) = answers(emu)
    assert oslo["response"] == {"output": {"city": "Oslo", "sky": "sunny"}}
    assert rome["response"] == {"output": {"city": "Rome", "sky": "sunny"}}
    assert reconnects == 1
    labels = {"server": mcp_server.name}
    assert metrics.get_sample_value("livebridge_mcp_reconnects_total", labels) == 1


async def test_a_server_that_is_not_there_fails_connect_naming_it() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"  # nobody listens
    tools = livebridge.ToolRegistry()
    tools.add_mcp(MCPServer.http(url, name="kb", start_timeout=5))
    async with Emulator() as emu:
        started = anyio.current_time()
        refused = r"'kb'.*could not start.*ConnectError"
        with pytest.raises(livebridge.MCPError, match=refused) as raised:
            async with open_session(emu, tools):
                raise AssertionError("connected")
        assert anyio.current_time() - started < 5.0  # refused: no need to wait for the bound
        assert emu.transcript == []  # nothing was opened
    assert raised.value.server == "kb"
