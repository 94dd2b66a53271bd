"""What only ``PostgresStore`` has: its tables as an audit trail, a schema migrated by hand, a
server that is down or frozen (SIGSTOP, longer than a lease) answered within the timeout, and
nothing run twice across that freeze."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest

from livebridge import LiveSession
from livebridge.calls.observers import LeaseChanged, Recorder
from livebridge.emulator import Emulator
from livebridge.errors import ConversationBusyError, LeaseLostError, StoreUnavailableError
from livebridge.protocol.events import Closed, TurnComplete
from livebridge.store import Entry, HandleRecord, PostgresStore
from tests.store.test_store_fencing import rome_entry, until
from tests.store.test_store_session import Booking
from tests.support.gemini_sessions import MODEL, TEXT_CONFIG, collect_until
from tests.support.postgres_server import PostgresServer, prefix
from tests.support.timing import seconds

LEASE_TTL = 1.0

#: The audit query of docs/store.md: every journaled call of a conversation, oldest first.
AUDIT = """
SELECT call_id, name, state, kind, epoch, fence, owner, started_at, settled_at, forgotten,
       entry::jsonb -> 'response' AS response
FROM {p}_call WHERE conversation = %s ORDER BY started_at, id
"""


def entry(call_id: str, state: str = "started", **extra: Any) -> Entry:
    return Entry(call_id, "book", f"req-{call_id}", state, 1, "w1", time.time(), **extra)  # type: ignore[arg-type]


async def test_the_journal_is_an_audit_trail(postgres_server: PostgresServer) -> None:
    """A handle forgets the settled calls it covers from the journal, not from the table."""
    tables = prefix()
    store = PostgresStore(postgres_server.url, prefix=tables)
    try:
        lease = await store.acquire("user-42", "w1", 10.0)
        await store.begin("user-42", lease, entry("a"))
        answer = {"output": {"booked": "Rome"}}
        done = entry("a", "settled", kind="ok", response=answer, settled_at=time.time())
        await store.write("user-42", lease, entries=[done, entry("b")])
        handle = HandleRecord("h2", 2, time.time(), "w1")
        await store.write("user-42", lease, handle=handle, forget=["a"])
        assert [e.call_id for e in (await store.load("user-42")).entries] == ["b"]
    finally:
        await store.aclose()
    rows = postgres_server.sql(AUDIT.replace("{p}", tables), "user-42")
    assert [(r[0], r[2], r[3], r[5], r[6], r[9]) for r in rows] == [
        ("a", "settled", "ok", lease.epoch, "w1", True),
        ("b", "started", None, lease.epoch, "w1", False),
    ]
    assert rows[0][7].year == rows[0][8].year >= 2024  # started_at, settled_at: timestamps
    assert rows[0][10] == {"output": {"booked": "Rome"}}


async def test_a_schema_migrated_by_hand(postgres_server: PostgresServer) -> None:
    tables = prefix()
    store = PostgresStore(postgres_server.url, prefix=tables, migrate=False)
    try:
        with pytest.raises(StoreUnavailableError, match=f"{tables}_acquire.*does not exist"):
            await store.acquire("c", "w1", 10.0)
        postgres_server.sql(PostgresStore.schema(tables))
        postgres_server.sql(PostgresStore.schema(tables))  # idempotent
        assert (await store.acquire("c", "w1", 10.0)).epoch == 1
    finally:
        await store.aclose()
    with pytest.raises(ValueError, match="lower-case SQL identifier"):
        PostgresStore(postgres_server.url, prefix="drop table;")
    with pytest.raises(ValueError, match="timeout must be positive"):
        PostgresStore(postgres_server.url, timeout=0)


async def test_a_server_down_or_frozen_is_one_clear_error_within_the_timeout() -> None:
    server = PostgresServer()
    store = PostgresStore(server.url, timeout=0.5, lease_ttl=30.0)
    try:
        w1 = await store.acquire("c1", "w1", 30.0)
        for fault, recover in ((server.kill, server.start), (server.pause, server.resume)):
            fault()
            for operation in (
                store.load("c1"),
                store.begin("c1", w1, entry("a")),
                store.renew("c1", w1, 30.0),
            ):
                started = time.monotonic()
                with pytest.raises(StoreUnavailableError, match=f"PostgreSQL at {server.url}"):
                    await operation
                # the timeout, not psycopg's 5 s cancel
                assert time.monotonic() - started < seconds(2.0)
            recover()
            with anyio.fail_after(seconds(30)):  # the pool reconnects on its own
                while True:
                    try:
                        assert await store.renew("c1", w1, 30.0)  # the data survived: still ours
                        break
                    except StoreUnavailableError:
                        await anyio.sleep(0.1)
        await store.begin("c1", w1, entry("a"))
        assert [e.call_id for e in (await store.load("c1")).entries] == ["a"]
    finally:
        await store.aclose()
        server.close()


def pause_then_take_over(server: PostgresServer, tables: str, booked: list[str]) -> None:
    """Worker B, on a thread of its own while worker A's loop is held (so B reaches the
    server first once it is back): PostgreSQL frozen (SIGSTOP) longer than A's lease, then B
    takes the conversation, runs ``book_table(Rome)`` journaled, and leaves."""

    async def worker_b() -> None:
        store = PostgresStore(server.url, prefix=tables, lease_ttl=LEASE_TTL, timeout=0.5)
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

    server.pause()
    try:
        threading.Event().wait(LEASE_TTL * 1.5)  # the pause itself: longer than the lease
    finally:
        server.resume()
    anyio.run(worker_b)


async def test_a_server_frozen_longer_than_the_lease_runs_nothing_twice() -> None:
    server = PostgresServer()
    tables = prefix()
    app, booked_by_b, recorder = Booking(), list[str](), Recorder()
    store = PostgresStore(server.url, prefix=tables, lease_ttl=LEASE_TTL, timeout=0.5)
    holder = f"SELECT owner FROM {tables}_conversation WHERE conversation = 'c'"
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
                    owner = session._store.owner if session._store else ""
                    thread = threading.Thread(
                        target=pause_then_take_over, args=(server, tables, booked_by_b)
                    )
                    thread.start()
                    thread.join()  # A's loop is held meanwhile: B acts first

                    async def decided() -> bool:  # A ended, or (the defect) took it back
                        rows = await anyio.to_thread.run_sync(server.sql, holder)
                        return rows == [(owner,)] or session.closed is not None

                    await until(decided)
                    if session.closed is None:  # (the defect) A goes on: the user asks again
                        await session.send_text("Book in Rome")
                    async for event in session.events():
                        events.append(event)
                        if isinstance(event, TurnComplete):
                            break
            await emu.settled()
    finally:
        await store.aclose()
        server.close()
    assert booked_by_b == ["Rome"]
    assert app.booked == ["Paris"]  # A never booked Rome: run once in total
    assert [e.event for e in recorder.of(LeaseChanged)] == ["acquired", "lost"]
    assert isinstance(session.closed, Closed)
    assert isinstance(session.closed.error, LeaseLostError)
    assert not [e for e in events if isinstance(e, TurnComplete)]
