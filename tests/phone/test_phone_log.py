"""One log line per call at its start and one at its end, over real sockets: the simulated
caller, the bridge, the emulator."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator

import anyio
import pytest
import pytest_asyncio

from livebridge.calls.tools import ToolRegistry
from livebridge.demo.phone import GOODBYE, QUESTION, PhoneScript, phone_line, phone_tools
from livebridge.emulator import Emulator
from livebridge.phone.bridge import CallEnded, Listener, PhoneEvent
from livebridge.phone.caller import SimulatedCaller, speech
from tests.support.timing import seconds

pytestmark = pytest.mark.asyncio(loop_scope="module")

WAIT = seconds(20.0)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def emulator() -> AsyncIterator[Emulator]:
    async with Emulator(PhoneScript(reply_seconds=0.6)) as emu:
        yield emu


def ended_waiter(events: list[PhoneEvent], done: anyio.Event) -> Listener:
    def listen(event: PhoneEvent) -> None:
        events.append(event)
        if isinstance(event, CallEnded):
            done.set()

    return listen


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "livebridge.phone"]


async def test_a_call_is_logged_at_its_start_and_its_end(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="livebridge.phone")
    events: list[PhoneEvent] = []
    done = anyio.Event()
    sid = "CA0000000000000000000000000000beef"
    async with (
        phone_line(emulator, phone_tools(0.05), listeners=[ended_waiter(events, done)]) as (
            _,
            url,
        ),
        SimulatedCaller.dial(url, call_sid=sid, parameters={"caller": "+15550100"}) as caller,
    ):
        await caller.say(speech(QUESTION))
        await caller.wait_until(lambda: bool(caller.echoed), WAIT)
        await caller.say(speech(GOODBYE))
        await caller.wait_until(lambda: caller.closed_at is not None, WAIT)
        with anyio.fail_after(WAIT):
            await done.wait()
    started, ended = [line for line in lines(caplog) if sid in line]
    assert started.startswith(f"call {sid} started: stream MZ")
    assert "parameters caller" in started
    match = re.fullmatch(rf"call {sid} ended after ([0-9.]+) s \(hung_up\): tool calls 3 ok", ended)
    assert match is not None, ended
    (end,) = [e for e in events if isinstance(e, CallEnded)]
    assert (end.call_sid, end.tool_calls) == (sid, {"ok": 3})
    assert float(match[1]) == pytest.approx(end.duration, abs=0.05)
    assert 1.0 < end.duration < WAIT


async def test_a_hang_up_during_tool_calls_logs_them_cancelled(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="livebridge.phone")
    events: list[PhoneEvent] = []
    done = anyio.Event()
    sid = "CA0000000000000000000000000000cafe"
    running: list[str] = []
    both = anyio.Event()
    tools = ToolRegistry()

    @tools.tool(timeout=60.0)
    async def get_weather(city: str) -> dict[str, object]:
        """The weather in a city."""
        running.append(city)
        if len(running) == 2:
            both.set()
        await anyio.sleep(60)  # still running when the caller hangs up
        return {}

    async with phone_line(emulator, tools, listeners=[ended_waiter(events, done)]) as (_, url):
        async with SimulatedCaller.dial(url, call_sid=sid) as caller:
            await caller.say(speech(QUESTION))
            with anyio.fail_after(WAIT):
                await both.wait()
            await caller.hang_up()
        with anyio.fail_after(WAIT):
            await done.wait()
    (ended,) = [line for line in lines(caplog) if sid in line and "ended" in line]
    assert "(caller_hung_up): tool calls 2 cancelled" in ended, ended
    (end,) = [e for e in events if isinstance(e, CallEnded)]
    assert end.tool_calls == {"cancelled": 2}


async def test_a_stream_without_start_is_logged_once(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    from websockets.asyncio.client import connect

    caplog.set_level(logging.INFO, logger="livebridge.phone")
    done = anyio.Event()
    async with phone_line(emulator, phone_tools(), listeners=[ended_waiter([], done)]) as (_, url):
        async with connect(url) as ws:
            await ws.send('{"event": "connected"}')
        with anyio.fail_after(WAIT):
            await done.wait()
    assert [line for line in lines(caplog) if "without a valid start" in line] == [
        line for line in lines(caplog) if "stream ended" in line
    ]
    assert any("without a valid start (disconnected)" in line for line in lines(caplog))
