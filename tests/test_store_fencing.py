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

from livebridge import LiveSession
from livebridge.emulator import Emulator
from livebridge.errors import ConversationBusyError, LeaseLostError
from livebridge.events import Closed, TurnComplete
from livebridge.observe import LeaseChanged, Recorder, SessionClosed
from livebridge.store import Entry, RedisStore
from livebridge.store.base import request_digest
from tests.redis_server import RedisServer, redis_server
from tests.session_helpers import MODEL, TEXT_CONFIG, collect_until
from tests.test_store_session import Booking

__all__ = ["redis_server"]

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
                    await session.send_text("Book in Rome")  # as the user asks A again
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


async def _has_handle(store: RedisStore) -> bool:
    return (await store.load("c")).handle is not None
