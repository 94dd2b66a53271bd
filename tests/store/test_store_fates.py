"""Every way a stored conversation's session can end, and the store's full buffer: one fate each."""

from __future__ import annotations

import logging
import time

import anyio
import pytest
import redis.asyncio

from livebridge import LiveSession, ModelNotFoundError
from livebridge.calls.observers import Recorder, StoreOperation
from livebridge.emulator import Emulator
from livebridge.errors import LeaseLostError
from livebridge.protocol.events import TurnComplete
from livebridge.store import Entry, MemoryStore, RedisStore
from livebridge.store.journal import MAX_DEFERRED, Journal
from tests.store.test_store_session import Booking
from tests.support.gemini_sessions import MODEL, TEXT_CONFIG, client_messages, collect_until
from tests.support.redis_server import RedisServer
from tests.support.timing import seconds


async def test_a_session_whose_lease_is_taken_ends_with_lease_lost(
    redis_server: RedisServer,
) -> None:
    store = RedisStore(redis_server.url, lease_ttl=0.6)
    thief = redis.asyncio.Redis.from_url(redis_server.url)
    try:
        async with Emulator() as emu:
            with pytest.raises(LeaseLostError, match="'c' was taken over by another worker"):
                async with LiveSession.connect(
                    emu.client(),
                    model=MODEL,
                    tools=Booking().tools,
                    config=TEXT_CONFIG,
                    store=store,
                    conversation="c",
                ) as session:
                    await thief.set(store.keys("c")[0], "9 thief", px=60_000)
                    with anyio.fail_after(seconds(30)):
                        async for _ in session.events():
                            pass
            await emu.settled()
        assert await thief.get(store.keys("c")[0]) == b"9 thief"  # not released: not ours
    finally:
        await thief.aclose()
        await store.aclose()


async def test_a_first_connection_that_fails_gives_the_lease_back() -> None:
    store = MemoryStore()
    async with Emulator(models=["another-model"]) as emu:
        with pytest.raises(ModelNotFoundError):
            async with LiveSession.connect(
                emu.client(),
                model=MODEL,
                tools=Booking().tools,
                config=TEXT_CONFIG,
                store=store,
                conversation="c",
            ):
                pass
    await store.acquire("c", "next-worker", 10.0)  # free at once, no lease to wait out


async def test_a_stale_stored_handle_starts_a_fresh_session(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore()
    tools = Booking().tools
    async with Emulator() as emu:
        for expire in (False, True):
            if expire:
                emu.expire_handles()  # as the service does hours later
            async with LiveSession.connect(
                emu.client(),
                model=MODEL,
                tools=tools,
                config=TEXT_CONFIG,
                store=store,
                conversation="c",
            ) as session:
                await session.send_text("Hello")
                await collect_until(session, lambda e: isinstance(e, TurnComplete))
        await emu.settled()
    handles = [
        (setup.get("sessionResumption") or {}).get("handle")
        for setup in client_messages(emu, "setup")
    ]
    assert len(handles) == 3  # the first session, the refused resumption, a fresh session
    assert handles[0] is None and handles[1] and handles[2] is None
    assert "no longer known to the service; starting a fresh session" in caplog.text


async def test_deferred_writes_are_bounded_and_the_oldest_is_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorder = Recorder()
    journal = Journal(MemoryStore(), "c", "w1", [recorder])
    caplog.set_level(logging.WARNING, "livebridge.store")
    for i in range(MAX_DEFERRED + 2):
        journal.defer(Entry(f"id-{i}", "book", "r", "settled", 0, "w1", time.time()))
    assert [e.error for e in recorder.of(StoreOperation)] == ["dropped", "dropped"]
    assert "journal write of call id-0 dropped" in caplog.text
    journal.lease = await journal.store.acquire("c", "w1", 10.0)
    await journal.flush()
    entries = (await journal.store.load("c")).entries
    assert len(entries) == MAX_DEFERRED
    assert entries[0].call_id == "id-2"
