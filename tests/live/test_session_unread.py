"""An app that stops reading ``events()`` while the model keeps calling: the buffer keeps at
most ``settled_capacity`` fates, says what it dropped, and observers and metrics see them all."""

from __future__ import annotations

import threading
from collections import Counter

import anyio
from prometheus_client import CollectorRegistry

import livebridge
from livebridge import SessionOptions
from livebridge.calls.observers import CallSettled, Recorder
from livebridge.emulator import Conversation, Emulator
from livebridge.observe.metrics import PrometheusObserver
from livebridge.protocol.events import EventsDropped, ToolCallSettled, TurnComplete
from tests.support.gemini_sessions import collect_until, open_session

TURNS, CALLS = 100, 16


def lookup_tools() -> livebridge.ToolRegistry:
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def lookup(city: str) -> str:
        """Look a city up."""
        return f"found {city}"

    return tools


async def test_an_app_that_stops_reading_keeps_a_bounded_number_of_fates() -> None:
    done = threading.Event()  # the emulator runs its own event loop in another thread

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        for turn in range(TURNS):
            calls = [("lookup", {"city": f"c{turn}-{i}"}) for i in range(CALLS)]
            await conv.wait_answers(await conv.tool_call(calls), timeout=30)
        done.set()
        await conv.expect_turn(timeout=60)
        await conv.turn_complete()  # after every fate: the app reads up to it
        await conv.expect_turn(timeout=60)

    recorder, registry = Recorder(), CollectorRegistry()
    observers = [recorder, PrometheusObserver(registry)]
    options = SessionOptions(event_capacity=64, settled_capacity=100)
    async with (
        Emulator(scenario) as emu,
        open_session(emu, lookup_tools(), options=options, observers=observers) as s,
    ):
        await s.send_text("go")
        assert await anyio.to_thread.run_sync(done.wait, 120)
        await s.send_text("done")
        events = await collect_until(s, lambda e: isinstance(e, TurnComplete))
    total = TURNS * CALLS
    settled = [e for e in events if isinstance(e, ToolCallSettled)]
    kept = [e for e in events if not isinstance(e, EventsDropped)]
    assert len(kept) <= 64 + 4 * 64 + 100, len(kept)  # was every one of the 1,600 fates
    print(f"{total} calls unread: {len(kept)} events kept, {len(settled)} of them fates")
    assert len(settled) <= 100
    dropped = sum((Counter(e.settled) for e in events if isinstance(e, EventsDropped)), Counter())
    assert dropped["ok"] + len(settled) == total
    assert len(recorder.of(CallSettled)) == total
    counted = registry.get_sample_value(
        "livebridge_tool_calls_total",
        {"function": "lookup", "outcome": "ok", "behavior": "BLOCKING"},
    )
    assert counted == total
