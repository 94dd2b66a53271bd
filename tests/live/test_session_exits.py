"""Every way a session ends while a call runs gives that call exactly one fate.

For each exit path a real ``LiveSession`` talks to the emulator over TLS while a handler runs;
afterwards the call has one ``ToolCallSettled`` saying why, the observers saw it, and the
``livebridge_tool_calls_in_flight`` gauge is back to 0. An end the app did not ask for interrupts
its block, which raises ``SessionEndedError``; the events are read after it.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable

import anyio
import pytest
from prometheus_client import CollectorRegistry

import livebridge
from livebridge import SessionOptions
from livebridge.calls.observers import CallOrphaned, Recorder
from livebridge.emulator import Conversation, Emulator
from livebridge.errors import SessionEndedError
from livebridge.observe.metrics import PrometheusObserver
from livebridge.protocol.events import Closed, SessionEvent, ToolCallSettled, ToolCallStarted
from tests.support.gemini_sessions import collect_until, of_type, open_session

Script = Callable[[Conversation, Emulator], Awaitable[None]]


def slow_tools(started: threading.Event) -> livebridge.ToolRegistry:
    tools = livebridge.ToolRegistry()

    @tools.tool(timeout=60)
    async def slow_lookup(city: str) -> str:
        """Takes as long as it is allowed to."""
        started.set()
        await anyio.sleep_forever()
        return city

    return tools


async def run_until_closed(
    script: Script, *, options: SessionOptions | None = None, leave_early: bool = False
) -> tuple[list[SessionEvent], Recorder, CollectorRegistry, list[int]]:
    """Start a call, let ``script`` end the session; returns the events, the observers and the
    close codes the emulator received from the client."""
    started = threading.Event()  # the emulator runs its own event loop in another thread
    recorder = Recorder()
    registry = CollectorRegistry()
    emu_ref: list[Emulator] = []

    async def scenario(conv: Conversation) -> None:
        if conv.resumed_from is not None:
            await script(conv, emu_ref[0])
            return
        await conv.expect_turn()
        await conv.resumption_update()
        await conv.tool_call([("slow_lookup", {"city": "Oslo"})])
        await conv.resumption_update()
        assert await anyio.to_thread.run_sync(started.wait, 10)
        await script(conv, emu_ref[0])

    events: list[SessionEvent] = []
    async with Emulator(scenario) as emu:
        emu_ref.append(emu)
        observers = [recorder, PrometheusObserver(registry)]
        opening = open_session(emu, slow_tools(started), observers=observers, options=options)
        if leave_early:
            async with opening as session:
                await session.send_text("weather in Oslo?")
                events += await collect_until(session, lambda e: isinstance(e, ToolCallStarted))
                assert await anyio.to_thread.run_sync(started.wait, 10)
        else:  # the session ends on its own: the block is interrupted and told why
            with pytest.raises(SessionEndedError) as ended:
                async with opening as session:
                    await session.send_text("weather in Oslo?")
                    await anyio.sleep_forever()
            assert session.closed is not None and ended.value.reason == session.closed.reason
        async for event in session.events():
            events.append(event)
    closes = [
        entry.message["close"]["code"]
        for entry in emu.transcript
        if entry.direction == "client" and "close" in entry.message
    ]
    return events, recorder, registry, closes


def assert_one_fate(
    events: list[SessionEvent], registry: CollectorRegistry, outcome: str, reason: str
) -> ToolCallSettled:
    (settled,) = of_type(events, ToolCallSettled)
    assert settled.ending == outcome
    assert settled.reason is not None and reason in settled.reason
    in_flight = registry.get_sample_value("livebridge_tool_calls_in_flight")
    assert in_flight == 0
    assert isinstance(events[-1], Closed)
    return settled


@pytest.mark.parametrize(
    ("code", "reason", "expected"),
    [
        (1000, "", "the service closed the session"),
        (1007, "Request contains an invalid argument.", "Request contains an invalid argument"),
        (1008, "Policy violation", "Policy violation"),
    ],
)
async def test_server_close_orphans_the_running_call(code: int, reason: str, expected: str) -> None:
    async def close(conv: Conversation, emu: Emulator) -> None:
        await conv.close(code, reason)

    events, recorder, registry, _ = await run_until_closed(close)
    assert_one_fate(events, registry, "orphaned", expected)
    (orphan,) = recorder.of(CallOrphaned)
    assert orphan.name == "slow_lookup"


async def test_stale_handle_on_resume_orphans_the_running_call() -> None:
    async def expire_then_drop(conv: Conversation, emu: Emulator) -> None:
        emu.expire_handles()
        conv.session.abort()

    events, recorder, registry, _ = await run_until_closed(expire_then_drop)
    closed = of_type(events, Closed)[0]
    assert isinstance(closed.error, livebridge.SessionNotFoundError)
    assert_one_fate(events, registry, "orphaned", "stale")
    assert len(recorder.of(CallOrphaned)) == 1


async def test_reconnects_exhausted_orphans_the_running_call() -> None:
    async def drop(conv: Conversation, emu: Emulator) -> None:
        conv.session.abort()

    options = SessionOptions(reconnect_attempts=0)
    events, recorder, registry, _ = await run_until_closed(drop, options=options)
    assert_one_fate(events, registry, "orphaned", "gave up after 0 reconnects")
    assert len(recorder.of(CallOrphaned)) == 1


async def test_app_leaving_cancels_the_running_call_and_closes_with_1000() -> None:
    async def linger(conv: Conversation, emu: Emulator) -> None:
        await conv.expect_turn(timeout=30)

    options = SessionOptions(shutdown_grace=0.2)
    events, _, registry, closes = await run_until_closed(linger, options=options, leave_early=True)
    (settled,) = of_type(events, ToolCallSettled)
    assert settled.ending == "cancelled"  # answered with its cancellation while still open
    assert registry.get_sample_value("livebridge_tool_calls_in_flight") == 0
    assert events[-1] == Closed("closed by the app")
    assert closes == [1000]
