"""LiveSession with a conversation store, against the emulator: resuming the stored handle,
answering re-issued calls from the journal, leases, and a store that goes away."""

from __future__ import annotations

import signal
import time
from typing import Any

import anyio
import msgspec
import pytest
import redis.asyncio
from prometheus_client import CollectorRegistry

import livebridge
from livebridge import LiveSession
from livebridge.calls.observers import LeaseChanged, Recorder, StoreOperation
from livebridge.emulator import Emulator
from livebridge.errors import ConversationBusyError, UsageError
from livebridge.observe.metrics import PrometheusObserver
from livebridge.protocol.events import ToolCallSettled, TurnComplete
from livebridge.store import Entry, MemoryStore, RedisStore, Store
from livebridge.store.base import request_digest
from tests.support.gemini_sessions import (
    MODEL,
    TEXT_CONFIG,
    client_messages,
    collect_until,
    errors,
    of_type,
)
from tests.support.redis_server import RedisServer
from tests.support.timing import seconds


class Booking:
    """Tools for the rule model: it calls each for every place a turn names."""

    def __init__(self) -> None:
        self.booked: list[str] = []
        self.weather: list[str] = []
        self.tools = livebridge.ToolRegistry()

        @self.tools.tool
        async def book_table(city: str) -> dict[str, Any]:
            """Book a table (not idempotent)."""
            self.booked.append(city)
            return {"booked": city}

        @self.tools.tool(idempotent=True)
        async def get_weather(city: str) -> dict[str, Any]:
            """The weather (idempotent)."""
            self.weather.append(city)
            return {"sky": "clear"}


async def turn(
    emu: Emulator, app: Booking, store: Store, text: str, **extra: Any
) -> list[ToolCallSettled]:
    """One session of conversation ``c``: one user turn, up to its ``turnComplete``."""
    async with LiveSession.connect(
        emu.client(),
        model=MODEL,
        tools=app.tools,
        config=TEXT_CONFIG,
        store=store,
        conversation="c",
        **extra,
    ) as session:
        await session.send_text(text)
        events = await collect_until(session, lambda e: isinstance(e, TurnComplete))
    return of_type(events, ToolCallSettled)


async def dead_worker(store: Store, *entries: Entry) -> None:
    """A worker that took the conversation, journaled ``entries`` and died (lease not released)."""
    lease = await store.acquire("c", "dead", store.lease_ttl)
    for entry in entries:
        await store.begin("c", lease, entry)


def entry(name: str, epoch: int, **extra: Any) -> Entry:
    request = request_digest(name, b'{"city":"Paris"}')
    return Entry(f"gone-{name}", name, request, "started", epoch, "dead", time.time(), **extra)


async def wait_for_lease(store: Store) -> None:
    """Until the dead worker's lease lapsed (probing takes it: given back at once)."""
    with anyio.fail_after(seconds(30)):
        while True:
            try:
                await store.acquire("c", "probe", 0.001)
                return
            except ConversationBusyError:
                await anyio.sleep(0.05)


async def test_a_call_the_dead_worker_started_is_answered_outcome_unknown() -> None:
    app, store, recorder = Booking(), MemoryStore(lease_ttl=0.5), Recorder()
    metrics = PrometheusObserver(CollectorRegistry())
    async with Emulator() as emu:
        await turn(emu, app, store, "Weather in Oslo?")
        stored = (await store.load("c")).handle
        assert stored is not None and stored.seq == 1
        await dead_worker(store, entry("book_table", stored.seq), entry("get_weather", 1))
        with pytest.raises(ConversationBusyError, match="'c' is held by dead"):
            await turn(emu, app, store, "Book in Paris")
        await wait_for_lease(store)
        settled = await turn(emu, app, store, "Book in Paris", observers=[recorder, metrics])
        assert emu.sessions[-1].resumed_from == stored.handle
        await emu.settled()
        assert errors(emu) == []
    by_name = {s.name: s for s in settled}
    assert by_name["book_table"].outcome == "rejected"
    assert by_name["book_table"].error is not None
    assert by_name["book_table"].error["type"] == "outcome_unknown"
    assert by_name["book_table"].error["retryable"] is False
    message = by_name["book_table"].error["message"]
    assert "died while running this call (as gone-book_table)" in message
    assert app.booked == ["Oslo"]  # Paris never ran twice: the dead worker may have booked it
    assert by_name["get_weather"].outcome == "ok"  # idempotent: it runs again
    assert app.weather == ["Oslo", "Paris"]
    assert LeaseChanged("resumed", 2) in recorder.events
    sample = metrics.registry.get_sample_value
    assert sample("livebridge_store_lease_events_total", {"event": "resumed"}) == 1
    assert sample("livebridge_store_interrupted_calls_total") == 2
    reason = {"function": "book_table", "reason": "outcome_unknown"}
    assert sample("livebridge_tool_rejections_total", reason) == 1
    assert sample("livebridge_store_operation_seconds_count", {"operation": "load"}) == 1


async def test_a_result_the_dead_worker_recorded_is_the_answer() -> None:
    app, store = Booking(), MemoryStore(lease_ttl=0.3)
    async with Emulator() as emu:
        await turn(emu, app, store, "Weather in Oslo?")
        answer = {"output": {"booked": "Paris", "table": 7}}
        recorded = entry("book_table", 1, kind="ok", response=answer)
        await dead_worker(store, msgspec.structs.replace(recorded, state="settled"))
        await wait_for_lease(store)
        settled = await turn(emu, app, store, "Book in Paris")
        await emu.settled()
        responses = [
            response
            for message in client_messages(emu, "toolResponse")
            for response in message["functionResponses"]
            if response["name"] == "book_table"
        ]
        assert errors(emu) == []
    assert app.booked == ["Oslo"]
    assert {s.name: s.outcome for s in settled} == {"book_table": "duplicate", "get_weather": "ok"}
    assert [r["response"] for r in responses] == [{"output": {"booked": "Oslo"}}, answer]


async def test_answered_calls_are_trimmed_and_a_later_identical_call_runs(
    redis_server: RedisServer,
) -> None:
    app, recorder = Booking(), Recorder()
    store = RedisStore(redis_server.url, lease_ttl=2.0)
    try:
        async with Emulator() as emu:
            await turn(emu, app, store, "Book in Paris", observers=[recorder])
            snapshot = await store.load("c")
            await turn(emu, app, store, "Book in Paris")
            await emu.settled()
            assert errors(emu) == []
    finally:
        await store.aclose()
    assert app.booked == ["Paris", "Paris"]  # a new request: the model saw the first answer
    assert snapshot.handle is not None and snapshot.handle.seq == 1
    assert snapshot.entries == []  # the handle covers the answered call: trimmed
    operations = {e.operation for e in recorder.of(StoreOperation)}
    assert {"acquire", "load", "begin", "write", "release"} <= operations
    assert [e.event for e in recorder.of(LeaseChanged)] == ["acquired", "released"]


async def test_redis_stopped_mid_conversation(redis_server: RedisServer) -> None:
    app = Booking()
    store = RedisStore(redis_server.url, lease_ttl=1.5, timeout=0.3)
    lease_key = store.keys("c")[0]
    probe = redis.asyncio.Redis.from_url(redis_server.url)
    try:
        async with (
            Emulator() as emu,
            LiveSession.connect(
                emu.client(),
                model=MODEL,
                tools=app.tools,
                config=TEXT_CONFIG,
                store=store,
                conversation="c",
            ) as session,
        ):
            await session.send_text("Book in Paris")
            first = await collect_until(session, lambda e: isinstance(e, TurnComplete))
            redis_server.stop()
            await session.send_text("Book in Rome")
            down = await collect_until(session, lambda e: isinstance(e, TurnComplete))
            redis_server.start()
            probe = redis.asyncio.Redis.from_url(redis_server.url)
            with anyio.fail_after(seconds(30)):  # the heartbeat takes the lease again
                while await probe.get(lease_key) is None:  # noqa: ASYNC110 (another process)
                    await anyio.sleep(0.05)
            await session.send_text("Book in Lima")
            back = await collect_until(session, lambda e: isinstance(e, TurnComplete))
        await emu.settled()
        assert errors(emu) == []
        handle = await probe.get(store.keys("c")[2])
    finally:
        await probe.aclose()
        await store.aclose()
    assert app.booked == ["Paris", "Lima"]  # Rome was never run without its journal entry
    assert app.weather == ["Paris", "Rome", "Lima"]  # idempotent: needs no journal
    outcomes = {s.name: s for s in of_type(down, ToolCallSettled)}
    assert outcomes["book_table"].outcome == "rejected"
    assert outcomes["book_table"].error is not None
    assert outcomes["book_table"].error["type"] == "store_unavailable"
    assert outcomes["book_table"].error["retryable"] is True
    assert "conversation store is unavailable" in outcomes["book_table"].error["message"]
    assert [s.outcome for s in of_type(first + back, ToolCallSettled)] == ["ok"] * 4
    assert handle is not None and b'"seq":3' in handle  # stored again in the restarted Redis


async def test_a_redis_that_stops_answering_refuses_the_journaled_call_in_time(
    redis_server: RedisServer,
) -> None:
    """Frozen (SIGSTOP), Redis keeps its socket open and says nothing: the one timeout around
    each journal write still answers the call ``store_unavailable``, and nothing runs it."""
    app = Booking()
    store = RedisStore(redis_server.url, lease_ttl=3.0, timeout=0.3)
    assert redis_server.process is not None
    try:
        async with (
            Emulator() as emu,
            LiveSession.connect(
                emu.client(),
                model=MODEL,
                tools=app.tools,
                config=TEXT_CONFIG,
                store=store,
                conversation="c",
            ) as session,
        ):
            redis_server.process.send_signal(signal.SIGSTOP)
            try:
                started = time.monotonic()
                await session.send_text("Book in Rome")
                frozen = await collect_until(session, lambda e: isinstance(e, TurnComplete))
                took = time.monotonic() - started
            finally:
                redis_server.process.send_signal(signal.SIGCONT)
        await emu.settled()
        assert errors(emu) == []
    finally:
        await store.aclose()
    assert app.booked == []  # never run without its journal entry
    assert app.weather == ["Rome"]
    outcomes = {s.name: s for s in of_type(frozen, ToolCallSettled)}
    assert outcomes["book_table"].error is not None
    assert outcomes["book_table"].error["type"] == "store_unavailable"
    assert took < seconds(10)  # the 0.3 s timeout, with a generous bound for a loaded machine


async def test_a_store_needs_a_conversation_id(gemini_emulator: Emulator) -> None:
    with pytest.raises(UsageError, match="a store needs a conversation id"):
        LiveSession(
            gemini_emulator.client(), model=MODEL, tools=Booking().tools, store=MemoryStore()
        )
