"""Lease fencing against a real Redis: a worker that lost its lease, even while Redis was
paused, never acts again; a handle never covers a started call; the heartbeat keeps a
conversation's handle and journal alive."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
import redis.asyncio

from livebridge import LiveSession, ToolRegistry
from livebridge.calls.call import Outcome
from livebridge.calls.observers import LeaseChanged, Recorder, SessionClosed
from livebridge.emulator import Emulator
from livebridge.errors import ConversationBusyError, LeaseLostError
from livebridge.protocol.events import Closed, ToolCallStarted, TurnComplete
from livebridge.store import Entry, MemoryStore, PostgresStore, RedisStore, Store
from livebridge.store.base import request_digest
from livebridge.store.journal import Journal
from tests.store.test_store_journal import admit
from tests.store.test_store_session import Booking
from tests.support.gemini_sessions import MODEL, TEXT_CONFIG, collect_until
from tests.support.postgres_server import PostgresServer, prefix
from tests.support.redis_server import RedisServer

LEASE_TTL = 1.0


async def until(condition: Callable[[], Awaitable[bool]], timeout: float = 30.0) -> None:  # noqa: ASYNC109
    """Poll a condition another process (Redis) decides."""
    with anyio.fail_after(timeout):
        while not await condition():  # noqa: ASYNC110 (another process)
            await anyio.sleep(0.02)


def rome_entry(owner: str, state: str, **extra: Any) -> Entry:
    request = request_digest("book_table", b'{"city":"Rome"}')
    return Entry("b-rome", "book_table", request, state, 1, owner, time.time(), **extra)  # type: ignore[arg-type]


def pause_redis_then_take_over(server: RedisServer, booked: list[str]) -> None:
    """Worker B, on a thread of its own while worker A's loop is held (so B reaches Redis
    first once it is back): Redis frozen (SIGSTOP) longer than A's lease, then B takes the
    conversation, runs ``book_table(Rome)`` journaled, and leaves without a new handle."""
    assert server.process is not None

    async def worker_b() -> None:
        store = RedisStore(server.url, lease_ttl=LEASE_TTL, timeout=0.3)
        try:
            while True:
                try:
                    lease = await store.acquire("c", "worker-b", 5.0)
                    break
                except ConversationBusyError as busy:
                    await anyio.sleep(max(busy.retry_after, 0.01))
            await store.begin("c", lease, rome_entry("worker-b", "started"))
            booked.append("Rome")
            done = rome_entry("worker-b", "settled", kind="ok", response={"booked": "Rome"})
            await store.write("c", lease, entries=[done])
            await store.release("c", lease)
        finally:
            await store.aclose()

    server.process.send_signal(signal.SIGSTOP)
    try:
        threading.Event().wait(LEASE_TTL * 1.5)  # the pause itself: longer than the lease
    finally:
        server.process.send_signal(signal.SIGCONT)
    anyio.run(worker_b)


async def test_split_brain_after_a_redis_pause_ends_the_old_owner(
    redis_server: RedisServer,
) -> None:
    app, booked_by_b = Booking(), list[str]()
    recorder = Recorder()
    store = RedisStore(redis_server.url, lease_ttl=LEASE_TTL, timeout=0.3)
    lease_key = store.keys("c")[0]
    probe = redis.asyncio.Redis.from_url(redis_server.url)
    events: list[Any] = []
    try:
        async with Emulator() as emu:
            with pytest.raises(LeaseLostError, match="'c' was taken over"):
                async with LiveSession.connect(
                    emu.client(),
                    model=MODEL,
                    tools=app.tools,
                    config=TEXT_CONFIG,
                    store=store,
                    conversation="c",
                    observers=[recorder],
                ) as session:
                    await session.send_text("Book in Paris")
                    await collect_until(session, lambda e: isinstance(e, TurnComplete))
                    await until(lambda: _has_handle(store))
                    owner = session._store.owner if session._store else ""
                    thread = threading.Thread(
                        target=pause_redis_then_take_over, args=(redis_server, booked_by_b)
                    )
                    thread.start()
                    thread.join()  # A's loop is held meanwhile: B acts first

                    async def decided() -> bool:  # A ended, or (the defect) took it back
                        holder = await probe.get(lease_key)
                        back = isinstance(holder, bytes) and holder.endswith(owner.encode())
                        return back or session.closed is not None

                    await until(decided)
                    if session.closed is None:  # (the defect) A goes on: the user asks again
                        await session.send_text("Book in Rome")
                    async for event in session.events():
                        events.append(event)
                        if isinstance(event, TurnComplete):
                            break
            await emu.settled()
    finally:
        await probe.aclose()
        await store.aclose()
    assert booked_by_b == ["Rome"]
    assert app.booked == ["Paris"]  # A never booked Rome: run once in total
    assert [e.event for e in recorder.of(LeaseChanged)] == ["acquired", "lost"]
    assert [e.reason for e in recorder.of(SessionClosed)] == ["the conversation was taken over"]
    assert isinstance(session.closed, Closed)  # the app's Closed, with why
    assert isinstance(session.closed.error, LeaseLostError)
    assert not [e for e in events if isinstance(e, TurnComplete)]  # A answered nothing more


@pytest.fixture(params=["memory", "redis", "postgres"])
def make_store(request: pytest.FixtureRequest) -> Callable[..., Store]:
    if request.param == "memory":
        return MemoryStore
    if request.param == "postgres":
        postgres: PostgresServer = request.getfixturevalue("postgres_server")
        tables = prefix()
        return lambda **options: PostgresStore(postgres.url, prefix=tables, **options)
    server: RedisServer = request.getfixturevalue("redis_server")
    return lambda **options: RedisStore(server.url, **options)


async def test_a_handle_that_arrives_while_a_call_runs_never_covers_it(
    make_store: Callable[..., Store],
) -> None:
    """The service sends no handle while a call is pending; if it did, a takeover resuming
    that handle must still answer the started call ``outcome_unknown``, never run it again."""
    store = make_store()
    try:
        journal = Journal(store, "c", "w1")
        journal.lease = await store.acquire("c", "w1", 10.0)
        journal.handle("h1")
        await journal.flush()
        ticket = admit(journal, "book", "call-1")
        await ticket.begin()  # journaled started; the handler runs...
        journal.handle("h2")  # ...when a resumable handle arrives
        await journal.flush()  # and the worker dies before the call is answered
        snapshot = await store.load("c")
        assert snapshot.handle is not None and snapshot.handle.handle == "h2"  # stored
        successor = Journal(store, "c", "w2")
        assert successor.restore(snapshot) == 1  # resuming h2: call-1 is not known
        reissued = admit(successor, "book", "call-2")
        assert isinstance(reissued, Outcome) and reissued.duplicate_of == "call-1"
        assert reissued.response["error"]["type"] == "outcome_unknown"
        ticket.settled(Outcome("call-1", "book", "ok", {"output": "Paris"}))  # (had it lived)
        journal.handle("h3")  # the next handle after the answer covers it
        assert journal.seq == snapshot.handle.seq + 1
    finally:
        await store.aclose()


@pytest.mark.parametrize("kind", ["memory", "redis", "postgres"])
@pytest.mark.parametrize(("handle_ttl", "lease_ttl"), [(10.0, 10.0), (5.0, 10.0)])
def test_a_handle_ttl_within_the_lease_is_refused(
    kind: str, handle_ttl: float, lease_ttl: float
) -> None:
    with pytest.raises(ValueError, match=r"handle_ttl \(.*\) must be longer than lease_ttl"):
        if kind == "memory":
            MemoryStore(handle_ttl=handle_ttl, lease_ttl=lease_ttl)
        elif kind == "postgres":
            PostgresStore("postgresql://127.0.0.1:1/x", handle_ttl=handle_ttl, lease_ttl=lease_ttl)
        else:
            RedisStore("redis://127.0.0.1:1/0", handle_ttl=handle_ttl, lease_ttl=lease_ttl)


async def test_the_heartbeat_keeps_the_handle_and_journal_alive(
    make_store: Callable[..., Store],
    gemini_emulator: Emulator,
) -> None:
    """A session that lives longer than ``handle_ttl`` keeps its handle and a running call's
    ``started`` entry: they expire ``handle_ttl`` after the last heartbeat, not the last write."""
    handle_ttl = 1.5
    store = make_store(handle_ttl=handle_ttl, lease_ttl=0.6)
    tools, release = ToolRegistry(), anyio.Event()

    @tools.tool(timeout=60.0)
    async def book_table(city: str) -> dict[str, str]:
        """Book a table (not idempotent): it waits for the test."""
        await release.wait()
        return {"booked": city}

    try:
        async with (
            LiveSession.connect(
                gemini_emulator.client(),
                model=MODEL,
                tools=tools,
                config=TEXT_CONFIG,
                store=store,
                conversation="c",
            ) as session,
        ):
            await session.send_text("Hello")
            await collect_until(session, lambda e: isinstance(e, TurnComplete))
            await until(lambda: _has_handle(store))
            await session.send_text("Book in Rome")
            await collect_until(session, lambda e: isinstance(e, ToolCallStarted))
            await anyio.sleep(handle_ttl * 2)  # the time under test: past the TTL of every write
            snapshot = await store.load("c")
            release.set()
            await collect_until(session, lambda e: isinstance(e, TurnComplete))
    finally:
        await store.aclose()
    assert snapshot.handle is not None
    assert [(e.name, e.state) for e in snapshot.entries] == [("book_table", "started")]


async def _has_handle(store: Store) -> bool:
    return (await store.load("c")).handle is not None
