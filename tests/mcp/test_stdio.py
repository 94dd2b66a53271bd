"""MCP tools over stdio, through real Live sessions against the emulator."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from prometheus_client import CollectorRegistry

import livebridge
from livebridge.calls.observers import CallSettled, Recorder
from livebridge.emulator import Conversation, Emulator
from livebridge.mcp import MCPServer
from livebridge.mcp.connection import connection_for
from livebridge.observe.metrics import PrometheusObserver
from livebridge.observe.trace import TraceObserver
from livebridge.protocol.events import TextOut
from tests.support.gemini_sessions import client_messages, collect_until, errors, open_session
from tests.support.timing import seconds

SERVER = str(Path(__file__).with_name("server.py"))


def server(marks: Path | None = None, **options: Any) -> MCPServer:
    env = {"MCP_MARKS": str(marks)} if marks else None
    return MCPServer.stdio(sys.executable, SERVER, env=env, start_timeout=60, **options)


def answers(emu: Emulator) -> list[list[dict[str, Any]]]:
    return [m["functionResponses"] for m in client_messages(emu, "toolResponse")]


def said(text: str) -> Any:
    return lambda event: isinstance(event, TextOut) and event.text == text


async def test_parallel_calls_are_answered_in_one_message() -> None:
    mcp_server = server()
    tools = livebridge.ToolRegistry()
    tools.add_mcp(mcp_server, include=["lookup", "describe", "refuse"], prefix="w_")

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

    metrics, recorder = CollectorRegistry(), Recorder()
    observers = [PrometheusObserver(metrics), recorder]
    async with (
        Emulator(scenario) as emu,
        open_session(emu, tools, observers=observers) as session,
    ):
        await session.send_text("Weather?")
        await collect_until(session, said("done"))
    records = [TraceObserver().record_fields(e) for e in recorder.of(CallSettled)]

    (message,) = answers(emu)
    got = [a["response"] for a in message]
    assert got[0] == {"output": {"city": "Oslo", "sky": "sunny"}}
    assert got[1] == {"output": {"city": "Lima", "sky": "sunny"}}
    assert got[2] == {"output": {"result": "Oslo is lovely"}}
    assert got[3]["error"]["type"] == "tool_error"
    assert "no forecast for Oslo" in got[3]["error"]["message"]
    assert got[4]["error"]["type"] == "invalid_arguments"
    assert errors(emu) == []
    assert [r.get("server") for r in records] == [mcp_server.name] * 5  # traces name the server
    calls = {"server": mcp_server.name, "outcome": "ok"}
    assert metrics.get_sample_value("livebridge_mcp_calls_total", calls) == 3


def children(marker: str) -> list[int]:
    """Processes this one started whose command line holds ``marker`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and marker in cmdline:
            found.append(int(entry.name))
    return found


async def wait_for_mark(marks: Path, line: str) -> None:
    """Until the server wrote ``line``: another process's file has no event to wait on."""
    path = anyio.Path(marks)
    with anyio.fail_after(seconds(30)):
        while line not in (await path.read_text() if await path.exists() else ""):  # noqa: ASYNC110
            await anyio.sleep(0.05)


async def test_a_hung_tool_is_answered_timeout_and_the_server_told_to_cancel(
    tmp_path: Path,
) -> None:
    marks = tmp_path / "marks"
    tools = livebridge.ToolRegistry()
    tools.add_mcp(server(marks), include=["hang", "lookup"], timeout=1.0)

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids = await conv.tool_call([("hang", {"city": "Oslo"}), ("lookup", {"city": "Oslo"})])
        await conv.wait_answers(ids)
        await conv.say("done")
        await conv.turn_complete()

    async with Emulator(scenario) as emu, open_session(emu, tools) as session:
        await session.send_text("Weather?")
        started = anyio.current_time()
        await collect_until(session, said("done"))
        elapsed = anyio.current_time() - started
        await wait_for_mark(marks, "cancelled hang")

    (message,) = answers(emu)
    hang, lookup = (a["response"] for a in message)
    assert hang["error"]["type"] == "timeout" and hang["error"]["retryable"] is True
    assert lookup == {"output": {"city": "Oslo", "sky": "sunny"}}
    assert 1.0 <= elapsed < seconds(10.0)
    assert errors(emu) == []


async def test_a_server_dying_mid_call_is_answered_unavailable_and_restarted(
    tmp_path: Path,
) -> None:
    marks = tmp_path / "marks"
    mcp_server = server(marks)
    tools = livebridge.ToolRegistry()
    tools.add_mcp(mcp_server, include=["crash", "lookup"])

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        first = await conv.tool_call([("crash", {"city": "Oslo"})])
        await conv.wait_answers(first)
        second = await conv.tool_call([("lookup", {"city": "Oslo"})])
        await conv.wait_answers(second)
        await conv.say("done")
        await conv.turn_complete()

    metrics = CollectorRegistry()
    observer = PrometheusObserver(metrics)
    async with (
        Emulator(scenario) as emu,
        open_session(emu, tools, observers=[observer]) as session,
    ):
        await session.send_text("Weather?")
        await collect_until(session, said("done"))
        restarts = connection_for(mcp_server).restarts
        up = metrics.get_sample_value("livebridge_mcp_up", {"server": mcp_server.name})

    (crashed,), (looked_up,) = answers(emu)
    assert crashed["response"]["error"]["type"] == "unavailable"
    assert crashed["response"]["error"]["retryable"] is True
    assert looked_up["response"] == {"output": {"city": "Oslo", "sky": "sunny"}}
    assert restarts == 1
    labels = {"server": mcp_server.name}
    assert metrics.get_sample_value("livebridge_mcp_restarts_total", labels) == 1
    assert up == 1
    assert metrics.get_sample_value("livebridge_mcp_up", labels) == 0
    assert children(SERVER) == []


async def test_a_reply_that_is_not_a_result_is_an_error_answer_and_the_session_goes_on() -> None:
    tools = livebridge.ToolRegistry()
    raw = MCPServer.stdio(sys.executable, str(Path(__file__).with_name("raw_server.py")))
    tools.add_mcp(raw)

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.wait_answers(await conv.tool_call([("garble", {"city": "Oslo"})]))
        await conv.wait_answers(await conv.tool_call([("lookup", {"city": "Rome"})]))
        await conv.say("done")
        await conv.turn_complete()

    async with Emulator(scenario) as emu, open_session(emu, tools) as session:
        await session.send_text("Weather?")
        await collect_until(session, said("done"))

    (garbled,), (looked_up,) = answers(emu)
    assert garbled["response"]["error"]["type"] == "bad_reply"
    assert looked_up["response"] == {"output": {"city": "Rome", "sky": "sunny"}}


async def test_a_server_that_never_starts_fails_connect_naming_it() -> None:
    never = MCPServer.stdio(
        sys.executable, "-c", "import time; time.sleep(600)", name="sleepy", start_timeout=1.0
    )
    tools = livebridge.ToolRegistry()
    tools.add_mcp(never)
    async with Emulator() as emu:
        started = anyio.current_time()
        with pytest.raises(livebridge.MCPError, match=r"sleepy.*within 1 s") as raised:
            async with open_session(emu, tools):
                raise AssertionError("connected")
        assert anyio.current_time() - started < 10.0
        assert emu.transcript == []  # nothing was opened
    assert raised.value.server == "sleepy"
    assert children("time.sleep(600)") == []

    missing = livebridge.ToolRegistry()
    missing.add_mcp(MCPServer.stdio("/nonexistent/mcp-server", name="ghost"))
    with pytest.raises(livebridge.MCPError, match=r"'ghost'.*could not start"):
        async with missing.connect_mcp():
            raise AssertionError("connected")


async def test_a_ten_megabyte_result_is_truncated_and_flagged() -> None:
    tools = livebridge.ToolRegistry()
    tools.add_mcp(server(), include=["big"], timeout=60)

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.wait_answers(await conv.tool_call([("big", {"megabytes": 10})]))
        await conv.say("done")
        await conv.turn_complete()

    policy = livebridge.CallPolicy(max_result_bytes=16_384)
    async with Emulator(scenario) as emu, open_session(emu, tools, policy=policy) as session:
        await session.send_text("Everything?")
        started = anyio.current_time()
        await collect_until(session, said("done"), timeout=90)
        print(f"10 MB result answered in {anyio.current_time() - started:.2f} s")

    ((answer,),) = answers(emu)
    response = answer["response"]
    assert response["truncated"] is True
    assert response["original_bytes"] > 10 * 1024 * 1024
    assert len(json.dumps(response)) <= 16_384 + 256


async def test_a_flood_of_progress_streams_partial_answers_and_the_result() -> None:
    tools = livebridge.ToolRegistry()
    tools.add_mcp(
        server(), include=["flood"], behavior="NON_BLOCKING", scheduling="SILENT", timeout=60
    )

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.wait_answers(await conv.tool_call([("flood", {"count": 1000})]))
        await conv.say("done")
        await conv.turn_complete()

    async with Emulator(scenario) as emu, open_session(emu, tools) as session:
        await session.send_text("Go")
        await collect_until(session, said("done"), timeout=60)

    sent = [a for message in answers(emu) for a in message]
    assert [a.get("willContinue") for a in sent][-1] is False
    assert all(a.get("willContinue") for a in sent[:-1])
    outputs = [a["response"].get("output") for a in sent[:-1]]
    assert outputs[-1] == {"result": {"steps": 1000}} or outputs[-1] == {"steps": 1000}
    progress = [o for o in outputs[:-1] if "progress" in o]
    assert 1 <= len(progress) <= 1000
    assert errors(emu) == []


async def test_sessions_share_one_server_which_ends_with_the_last(
    gemini_emulator: Emulator,
) -> None:
    mcp_server = server()
    tools = livebridge.ToolRegistry()
    tools.add_mcp(mcp_server, include=["lookup"])
    async with open_session(gemini_emulator, tools), open_session(gemini_emulator, tools):
        assert len(children(SERVER)) == 1
        assert connection_for(mcp_server).users == 1
    assert children(SERVER) == []
    assert connection_for(mcp_server).state == "stopped"


async def test_the_models_cancellation_reaches_the_server(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    tools = livebridge.ToolRegistry()
    tools.add_mcp(server(marks), include=["hang"], behavior="NON_BLOCKING", timeout=60)

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids = await conv.tool_call([("hang", {"city": "Oslo"})])
        await wait_for_mark(marks, "started hang")
        await conv.cancel(ids)
        await wait_for_mark(marks, "cancelled hang")
        await conv.say("done")
        await conv.turn_complete()

    async with Emulator(scenario) as emu, open_session(emu, tools) as session:
        await session.send_text("Weather?")
        started = anyio.current_time()
        await collect_until(session, said("done"), timeout=30)
        assert anyio.current_time() - started < 30
    assert answers(emu) == []  # a cancelled call is not answered
    assert errors(emu) == []
