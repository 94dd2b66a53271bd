"""A Redis that may evict keys is refused: under memory pressure it deletes a live
conversation's lease and journal, and a second worker takes it and runs a call again."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
import redis.asyncio

import livebridge
from livebridge import LiveSession
from livebridge.emulator import Emulator
from livebridge.errors import EvictionPolicyError, StoreUnavailableError, UsageError
from livebridge.store import RedisLimiter, RedisStore
from tests.support.gemini_sessions import MODEL, TEXT_CONFIG
from tests.support.redis_server import RedisServer

EVICTING = ["allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru", "volatile-ttl"]


@pytest.fixture
async def admin(redis_server: RedisServer) -> AsyncIterator[redis.asyncio.Redis]:
    """A client that sets the server's policy (``CONFIG SET`` is ``--maxmemory-policy`` live)."""
    client = redis.asyncio.Redis.from_url(redis_server.url)
    yield client
    await client.aclose()


async def held(admin: redis.asyncio.Redis) -> list[str]:
    return sorted(map(str, await admin.keys("livebridge:*")))


@pytest.mark.parametrize("policy", EVICTING)
async def test_an_evicting_redis_is_refused_before_any_lease(
    redis_server: RedisServer, admin: redis.asyncio.Redis, policy: str
) -> None:
    await admin.config_set("maxmemory-policy", policy)
    store = RedisStore(redis_server.url)
    try:
        with pytest.raises(EvictionPolicyError, match=rf"maxmemory-policy {policy}.*noeviction"):
            await store.acquire("c", "a", store.lease_ttl)
        assert await held(admin) == []  # nothing was written
    finally:
        await store.aclose()


async def test_a_refused_config_command_falls_back_to_info(
    redis_server: RedisServer, admin: redis.asyncio.Redis
) -> None:
    await admin.config_set("maxmemory-policy", "allkeys-lru")
    # as managed Redis do: CONFIG denied to the application user
    await admin.acl_setuser("default", enabled=True, nopass=True, commands=["-config"])
    store = RedisStore(redis_server.url)
    try:
        with pytest.raises(EvictionPolicyError, match="maxmemory-policy allkeys-lru") as caught:
            await store.acquire("c", "a", store.lease_ttl)
        assert caught.value.policy == "allkeys-lru"
    finally:
        await store.aclose()


async def test_an_unreadable_policy_is_refused_unless_allowed(
    redis_server: RedisServer, admin: redis.asyncio.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    await admin.acl_setuser("default", enabled=True, nopass=True, commands=["-config", "-info"])
    store = RedisStore(redis_server.url)
    allowing = RedisStore(redis_server.url, allow_eviction=True)
    try:
        with pytest.raises(EvictionPolicyError, match="cannot be read") as caught:
            await store.acquire("c", "a", store.lease_ttl)
        assert caught.value.policy is None
        with caplog.at_level(logging.WARNING, "livebridge.store"):
            await allowing.acquire("c", "a", allowing.lease_ttl)
        assert "cannot be read" in caplog.text and "allow_eviction=True" in caplog.text
    finally:
        await store.aclose()
        await allowing.aclose()


async def test_a_redis_back_from_a_failure_is_checked_again(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    store = RedisStore(redis_server.url, timeout=1.0)
    try:
        await store.acquire("c", "a", store.lease_ttl)  # noeviction: Debian's default
        redis_server.stop()
        with pytest.raises(StoreUnavailableError):
            await store.acquire("c", "a", store.lease_ttl)
        redis_server.start()  # another Redis on the same address, one that evicts
        admin = redis.asyncio.Redis.from_url(redis_server.url)
        await admin.config_set("maxmemory-policy", "volatile-lru")
        await admin.aclose()
        with pytest.raises(EvictionPolicyError, match="volatile-lru"):
            await store.acquire("c", "a", store.lease_ttl)
    finally:
        await store.aclose()


async def test_allowed_eviction_warns_and_really_loses_a_live_lease(
    redis_server: RedisServer, admin: redis.asyncio.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """What ``allow_eviction=True`` accepts: a cache filling the Redis evicts a held lease
    and its journal, and another worker takes the conversation without being told it is busy."""
    used = int((await admin.info("memory"))["used_memory"])
    await admin.config_set("maxmemory", used + 2_000_000)
    await admin.config_set("maxmemory-policy", "allkeys-lru")
    first = RedisStore(redis_server.url, allow_eviction=True)
    second = RedisStore(redis_server.url, allow_eviction=True)
    try:
        with caplog.at_level(logging.WARNING, "livebridge.store"):
            lease = await first.acquire("c", "worker-1", 60.0)
        assert "maxmemory-policy allkeys-lru" in caplog.text
        lease_key = first.keys("c")[0]
        for batch in range(200):  # at most 200 MB of cache entries
            async with admin.pipeline(transaction=False) as pipe:
                for i in range(1000):
                    pipe.set(f"cache:{batch}:{i}", b"x" * 1000)
                await pipe.execute()
            if not await admin.exists(lease_key):
                break
        assert not await admin.exists(lease_key), "the lease was never evicted"
        taken = await second.acquire("c", "worker-2", 60.0)  # no ConversationBusyError
        assert taken.owner == "worker-2" and lease.owner == "worker-1"
    finally:
        await first.aclose()
        await second.aclose()


async def test_a_session_on_an_evicting_redis_fails_connect(
    redis_server: RedisServer, admin: redis.asyncio.Redis
) -> None:
    await admin.config_set("maxmemory-policy", "allkeys-lru")
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def book_table(city: str) -> str:
        """Book a table (not idempotent)."""
        return city

    store = RedisStore(redis_server.url)
    try:
        async with Emulator() as emu:
            with pytest.raises(EvictionPolicyError, match="allkeys-lru"):
                async with LiveSession.connect(
                    emu.client(),
                    model=MODEL,
                    tools=tools,
                    config=TEXT_CONFIG,
                    store=store,
                    conversation="c",
                ):
                    pass
            await emu.settled()
            assert emu.sessions == []  # refused before any socket to the service opened
    finally:
        await store.aclose()


async def test_a_limiter_on_an_evicting_redis_cannot_start(
    redis_server: RedisServer, admin: redis.asyncio.Redis
) -> None:
    await admin.config_set("maxmemory-policy", "volatile-ttl")
    limiter = RedisLimiter(redis_server.url, "bookings", 2)
    with pytest.raises(EvictionPolicyError, match=r"limiter 'bookings'.*volatile-ttl") as caught:
        await limiter.start()
    assert isinstance(caught.value, UsageError)  # a configuration error, like a bad URL
    assert not limiter.running
    async with RedisLimiter(redis_server.url, "bookings", 2, allow_eviction=True) as allowed:
        assert allowed.running
