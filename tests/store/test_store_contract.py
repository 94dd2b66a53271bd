"""The ``Store`` contract: ``MemoryStore``, ``RedisStore`` (a real redis-server) and
``PostgresStore`` (a real PostgreSQL) pass the same tests; then what only one of them has
(Redis TTLs and failures, the memory bounds)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest

from livebridge.errors import ConversationBusyError, LeaseLostError, StoreUnavailableError
from livebridge.store import (
    Entry,
    HandleRecord,
    Lease,
    MemoryStore,
    PostgresStore,
    RedisStore,
    Store,
)
from tests.support.postgres_server import PostgresServer, prefix
from tests.support.redis_server import RedisServer
from tests.support.timing import seconds

Factory = Callable[..., Store]


def entry(call_id: str, state: str = "started", epoch: int = 0, **extra: Any) -> Entry:
    return Entry(call_id, "book", f"req-{call_id}", state, epoch, "w1", time.time(), **extra)  # type: ignore[arg-type]


@pytest.fixture(params=["memory", "redis", "postgres"])
async def make_store(request: pytest.FixtureRequest) -> AsyncIterator[Factory]:
    made: list[Store] = []
    if request.param == "memory":

        def factory(**options: Any) -> Store:
            made.append(MemoryStore(**options))
            return made[-1]

    elif request.param == "postgres":
        postgres: PostgresServer = request.getfixturevalue("postgres_server")
        tables = prefix()

        def factory(**options: Any) -> Store:
            made.append(PostgresStore(postgres.url, prefix=tables, **options))
            return made[-1]

    else:
        server: RedisServer = request.getfixturevalue("redis_server")

        def factory(**options: Any) -> Store:
            made.append(RedisStore(server.url, prefix="test", **options))
            return made[-1]

    yield factory
    for store in made:
        await store.aclose()


async def until(condition: Callable[[], Any], timeout: float = 10.0) -> None:  # noqa: ASYNC109
    """Poll an async condition (lease expiry is a matter of time)."""
    with anyio.fail_after(timeout):
        while not await condition():  # noqa: ASYNC110 (time passing, not an event)
            await anyio.sleep(0.02)


async def test_a_live_lease_keeps_other_owners_out(make_store: Factory) -> None:
    store = make_store()
    first = await store.acquire("c1", "w1", 10.0)
    w1 = await store.acquire("c1", "w1", 10.0)  # the holder may take it again: a new epoch
    assert w1.epoch == first.epoch + 1
    assert not await store.renew("c1", first, 10.0)  # the old epoch is fenced out
    with pytest.raises(ConversationBusyError, match="'c1' is held by w1") as busy:
        await store.acquire("c1", "w2", 10.0)
    assert busy.value.owner == "w1"
    assert 5.0 < busy.value.retry_after <= 10.0
    w2 = await store.acquire("c2", "w2", 10.0)  # another conversation is free
    assert not await store.renew("c1", Lease("w2", w1.epoch), 10.0)
    await store.release("c1", Lease("w2", w1.epoch))  # not the holder: nothing happens
    with pytest.raises(ConversationBusyError):
        await store.acquire("c1", "w2", 10.0)
    assert await store.renew("c1", w1, 10.0)
    await store.release("c1", w1)
    assert (await store.acquire("c1", "w2", 10.0)).epoch == w1.epoch + 1
    assert w2.epoch == 1


async def test_an_expired_lease_is_taken_over_and_fences_the_old_owner(make_store: Factory) -> None:
    store = make_store()
    w1 = await store.acquire("c1", "w1", 0.3)
    await store.begin("c1", w1, entry("a"))
    await until(lambda: _taken(store, "c1", "w2"))
    assert not await store.renew("c1", w1, 10.0)
    with pytest.raises(LeaseLostError, match="no longer holds the lease"):
        await store.begin("c1", w1, entry("b"))
    with pytest.raises(LeaseLostError):
        await store.write("c1", w1, handle=HandleRecord("h-old", 9, time.time()))
    with pytest.raises(LeaseLostError, match="acquired it since"):
        await store.acquire("c1", "w1", 10.0, since=w1)
    snapshot = await store.load("c1")
    assert snapshot.handle is None
    assert [e.call_id for e in snapshot.entries] == ["a"]


async def test_a_lapsed_lease_is_never_renewed(make_store: Factory) -> None:
    """Once lapsed, lost: even when nobody took it, only a new epoch acts again."""
    store = make_store()
    w1 = await store.acquire("c1", "w1", 0.2)
    await until(lambda: _lapsed(store, "c1", w1))
    assert not await store.renew("c1", w1, 10.0)
    with pytest.raises(StoreUnavailableError, match="lapsed"):  # nobody acquired it since
        await store.begin("c1", w1, entry("a"))
    again = await store.acquire("c1", "w1", 10.0, since=w1)
    assert again.epoch == w1.epoch + 1
    assert not await store.renew("c1", w1, 10.0)
    await store.begin("c1", again, entry("a"))
    with pytest.raises(ConversationBusyError):
        await store.acquire("c1", "w2", 10.0)


async def test_a_lease_taken_and_released_meanwhile_is_lost_for_good(make_store: Factory) -> None:
    """The split brain: w2 took the lapsed lease, journaled a call and left without a handle;
    w1's next heartbeat must not take the conversation back."""
    store = make_store()
    w1 = await store.acquire("c1", "w1", 0.2)
    await store.write("c1", w1, handle=HandleRecord("h1", 1, time.time(), "w1"))
    await until(lambda: _taken(store, "c1", "w2", release=False))
    w2 = await store.acquire("c1", "w2", 10.0)
    await store.begin("c1", w2, entry("rome"))
    await store.release("c1", w2)
    assert not await store.renew("c1", w1, 10.0)
    with pytest.raises(LeaseLostError):
        await store.begin("c1", w1, entry("rome-again"))
    with pytest.raises(LeaseLostError, match="acquired it since"):
        await store.acquire("c1", "w1", 10.0, since=w1)
    assert [e.call_id for e in (await store.load("c1")).entries] == ["rome"]


async def _taken(store: Store, conversation: str, owner: str, *, release: bool = False) -> bool:
    try:
        lease = await store.acquire(conversation, owner, 10.0)
    except ConversationBusyError:
        return False
    if release:
        await store.release(conversation, lease)
    return True


async def _lapsed(store: Store, conversation: str, lease: Lease) -> bool:
    """The lease expired (probing with a write: nothing is written once it lapsed)."""
    try:
        await store.write(conversation, lease)
    except StoreUnavailableError:
        return True
    return False


async def _busy(store: Store, conversation: str, owner: str) -> bool:
    try:
        await store.acquire(conversation, owner, 10.0)
    except ConversationBusyError:
        return True
    return False


async def test_journal_and_handle_round_trip(make_store: Factory) -> None:
    store = make_store()
    assert (await store.load("c1")).handle is None
    assert (await store.load("c1")).entries == []
    w1 = await store.acquire("c1", "w1", 10.0)
    await store.begin("c1", w1, entry("a", key="k1"))
    settled = entry("a", "settled", kind="ok", response={"output": {"booked": True}}, key="k1")
    await store.write("c1", w1, entries=[settled, entry("b")])
    handle = HandleRecord("h1", 1, time.time(), "w1")
    await store.write("c1", w1, handle=handle, forget=["b"], entries=[entry("c", epoch=1)])
    snapshot = await store.load("c1")
    assert snapshot.handle == handle
    by_id = {e.call_id: e for e in snapshot.entries}
    assert set(by_id) == {"a", "c"}
    assert by_id["a"] == settled
    assert by_id["c"].epoch == 1
    assert (await store.load("other")).entries == []


async def test_handles_and_journals_expire(make_store: Factory) -> None:
    store = make_store(handle_ttl=0.3, lease_ttl=0.1)
    w1 = await store.acquire("c1", "w1", 0.1)
    await store.write("c1", w1, handle=HandleRecord("h1", 1, time.time()), entries=[entry("a")])
    assert (await store.load("c1")).handle is not None

    async def gone() -> bool:
        snapshot = await store.load("c1")
        return snapshot.handle is None and not snapshot.entries

    await until(gone)


async def test_redis_keys_carry_ttls(redis_server: RedisServer) -> None:
    store = RedisStore(redis_server.url, prefix="t", handle_ttl=3600.0)
    try:
        w1 = await store.acquire("user-42", "w1", 10.0)
        await store.write(
            "user-42", w1, handle=HandleRecord("h", 1, time.time()), entries=[entry("a")]
        )
        lease, epoch, handle, journal = store.keys("user-42")
        assert lease == "t:{user-42}:lease"  # one hash tag: one cluster slot per conversation
        assert await store.redis.get(lease) == f"{w1.epoch} w1".encode()
        assert 9_000 < await store.redis.pttl(lease) <= 10_000
        for key in (epoch, handle, journal):
            assert 3_590_000 < await store.redis.pttl(key) <= 3_600_000
        assert sorted(await store.redis.keys("t:*")) == sorted(
            k.encode() for k in (lease, epoch, handle, journal)
        )
    finally:
        await store.aclose()


async def test_redis_down_is_one_clear_error_within_the_timeout(redis_server: RedisServer) -> None:
    store = RedisStore(redis_server.url, timeout=0.5)
    try:
        w1 = await store.acquire("c1", "w1", 10.0)
        redis_server.stop()
        for operation in (
            store.load("c1"),
            store.begin("c1", w1, entry("a")),
            store.renew("c1", w1, 10.0),
        ):
            started = time.monotonic()
            with pytest.raises(StoreUnavailableError, match=f"Redis at {redis_server.url}"):
                await operation
            assert time.monotonic() - started < seconds(5.0)
        redis_server.start()
        assert not await store.renew("c1", w1, 10.0)  # an empty Redis: lapsed, never renewed
        with pytest.raises(StoreUnavailableError, match="lapsed"):
            await store.begin("c1", w1, entry("a"))
        again = await store.acquire("c1", "w1", 10.0, since=w1)  # nobody acquired it since
        assert again.epoch == w1.epoch + 1  # the epoch goes on growing
    finally:
        await store.aclose()


async def test_memory_store_forgets_the_oldest_unleased_conversation_when_full() -> None:
    store = MemoryStore(max_conversations=2, max_entries=2)
    a = await store.acquire("a", "w1", 10.0)
    b = await store.acquire("b", "w1", 10.0)
    await store.release("b", b)
    await store.acquire("c", "w1", 10.0)  # "b" has no live lease: forgotten
    assert len(store) == 2
    with pytest.raises(StoreUnavailableError, match="memory store is full"):
        await store.acquire("d", "w1", 10.0)
    await store.write("a", a, entries=[entry("1"), entry("2"), entry("3")])
    assert [e.call_id for e in (await store.load("a")).entries] == ["2", "3"]
