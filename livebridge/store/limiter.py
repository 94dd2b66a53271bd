"""``RedisLimiter``: at most ``capacity`` handler bodies at once across every process.

Use it where one backend (a booking API, a database) must not see more than N concurrent
requests from all workers together::

    bookings = RedisLimiter("redis://localhost:6379", "bookings", 10)   # one per process
    policy = CallPolicy(limiter=bookings)          # every tool of the sessions using it

It runs while something uses it: ``LiveSession.connect`` starts it (a Redis it cannot reach
is a ``UsageError`` from ``connect``, before any socket to the service opens) and the last
session using it stops it; ``async with`` holds it running too, and a dispatcher used on its
own starts it on first use (stopped by ``aclose``).

Each slot is a lease: a member of the sorted set ``{prefix}:limiter:{name}`` scored with its
expiry in Redis server time. Taking a slot is one Lua script (drop expired members, count, add
if below ``capacity``), so the count is exact however many processes race. The limiter's own
task renews the slots it holds every ``lease / 3`` seconds and gives released ones back; a
process that dies (kill -9) stops renewing, and its slots come back ``lease`` seconds later.

Waiting for a slot polls, starting at ``poll`` seconds and doubling to ``poll * 8``: simple,
and fair enough for slots held for tens of milliseconds or more. A Redis that does not answer
makes ``acquire`` raise ``StoreUnavailableError`` (the call is answered ``store_unavailable``
and its handler does not run). A slot whose renewal finds it gone (it expired while Redis was
unreachable) is logged: the limit may then be exceeded by that one slot until it is released.

A Redis that may evict keys (``maxmemory-policy`` not ``noeviction``) could drop the sorted
set and with it every slot: ``start`` refuses it with ``EvictionPolicyError`` (a
``UsageError``) unless ``allow_eviction=True`` (``store/eviction.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from livebridge.errors import EvictionPolicyError, StoreError, UsageError
from livebridge.store import eviction
from livebridge.store.base import new_owner
from livebridge.store.redis import bounded, connect

if TYPE_CHECKING:
    import redis.asyncio

log = logging.getLogger("livebridge.store")

T = TypeVar("T")

# KEYS: set. ARGV: token, capacity, lease ms. → 1 taken, 0 full.
_ACQUIRE = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""
# KEYS: set. ARGV: lease ms, tokens... → how many of them were still held (and are renewed).
_RENEW = """
local t = redis.call('TIME')
local until_ = t[1] * 1000 + math.floor(t[2] / 1000) + tonumber(ARGV[1])
local held = 0
for i = 2, #ARGV do
  held = held + redis.call('ZADD', KEYS[1], 'XX', 'CH', until_, ARGV[i])
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return held
"""


class RedisLimiter:
    """A concurrency limit shared through Redis; usable as ``CallPolicy(limiter=...)``.

    Running while in use (see the module docstring): its task renews and releases the slots.
    """

    def __init__(
        self,
        url: str,
        name: str,
        capacity: int,
        *,
        prefix: str = "livebridge",
        lease: float = 10.0,
        timeout: float = 1.0,
        poll: float = 0.005,
        allow_eviction: bool = False,
    ) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        if not (lease > 0 and timeout > 0 and poll > 0):
            raise ValueError("lease, timeout and poll must be positive")
        self.url, self.name, self.capacity = url, name, capacity
        self.key = f"{prefix}:limiter:{name}"
        self.lease, self.timeout, self.poll = lease, timeout, poll
        self.allow_eviction = allow_eviction
        self._owner = new_owner()
        self._redis: redis.asyncio.Redis | None = None
        self._held: dict[object, str] = {}  # borrower → slot token
        self._releasing: list[str] = []
        self._wake = asyncio.Event()  # the task is a plain asyncio task: asyncio primitives
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._users = 0  # sessions and ``async with`` blocks using it now
        self._starting: asyncio.Lock | None = None

    @property
    def borrowed_tokens(self) -> int:
        """Slots this process holds now."""
        return len(self._held)

    @property
    def running(self) -> bool:
        return self._task is not None

    async def start(self) -> None:
        """Connect (checked with a PING) and start renewing; a no-op while running.

        Raises ``UsageError`` when it cannot work (no redis-py, a bad URL, Redis unreachable,
        or ``EvictionPolicyError``: a Redis that may evict the slots): a configuration error,
        said once, instead of one refusal per call.
        """
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._task is not None:
                return
            try:
                client = connect(self.url, self.timeout)
            except (ImportError, ValueError) as exc:
                raise UsageError(f"RedisLimiter {self.name!r} cannot work: {exc}") from None
            try:
                await self._call("ping", client.ping())
                policy = await self._call("read maxmemory-policy", eviction.read_policy(client))
                where = f"Redis at {self.url} (limiter {self.name!r})"
                eviction.judge(policy, where, allow=self.allow_eviction)
            except EvictionPolicyError:
                await client.aclose()
                raise
            except StoreError as exc:
                await client.aclose()
                raise UsageError(
                    f"RedisLimiter {self.name!r} cannot work: {exc}; check the URL and that"
                    " Redis is up"
                ) from None
            self._redis = client
            self._acquire = client.register_script(_ACQUIRE)
            self._renew = client.register_script(_RENEW)
            self._task = asyncio.get_running_loop().create_task(self._keep())

    async def aclose(self) -> None:
        """Stop renewing, give back every slot this process holds, close the connection."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping = True  # (a flag, not task.cancel(): the task ends between round trips)
        self._wake.set()
        with anyio.CancelScope(shield=True):
            await task
            self._stopping = False
            assert self._redis is not None
            with anyio.move_on_after(self.timeout):
                tokens, self._releasing = [*self._releasing, *self._held.values()], []
                if tokens:
                    await self._redis.zrem(self.key, *tokens)
            await self._redis.aclose()
            self._redis = None

    @contextlib.asynccontextmanager
    async def in_use(self) -> AsyncIterator[None]:
        """Running for the duration (started if needed; stopped when the last user leaves).
        ``LiveSession.connect`` enters it for its policy's limiter."""
        async with self:
            yield

    async def __aenter__(self) -> RedisLimiter:
        await self.start()
        self._users += 1
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._users -= 1
        if self._users == 0:
            await self.aclose()

    # -- the limiter interface the dispatcher uses ------------------------------------------

    def acquire_on_behalf_of_nowait(self, borrower: object) -> None:
        """Always ``anyio.WouldBlock``: a shared slot can only be known after a round trip."""
        raise anyio.WouldBlock

    async def acquire_on_behalf_of(self, borrower: object) -> None:
        """Wait for a slot; ``StoreUnavailableError`` when Redis does not answer."""
        if self._task is None:  # used on its own: it starts itself (``aclose`` stops it)
            await self.start()
        if borrower in self._held:
            raise RuntimeError(f"{borrower!r} already holds a slot of {self.name!r}")
        token = f"{self._owner}:{secrets.token_hex(4)}"
        delay = self.poll
        args: list[str | int] = [token, self.capacity, round(self.lease * 1000)]
        while not await self._call("acquire", self._acquire(keys=[self.key], args=args)):
            await anyio.sleep(delay)
            delay = min(delay * 2, self.poll * 8)
        self._held[borrower] = token

    def release_on_behalf_of(self, borrower: object) -> None:
        """Give the slot back (written by the limiter's task at once, in the background)."""
        token = self._held.pop(borrower, None)
        if token is None:
            raise RuntimeError(f"{borrower!r} holds no slot of {self.name!r}")
        self._releasing.append(token)
        self._wake.set()

    # -- the limiter's task -----------------------------------------------------------------

    async def _keep(self) -> None:
        """Release returned slots at once; renew held slots every ``lease / 3`` seconds."""
        assert self._redis is not None
        renew_at = anyio.current_time() + self.lease / 3
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(renew_at - anyio.current_time(), 0)):
                    await self._wake.wait()
            self._wake.clear()
            if self._stopping:
                return
            tokens, self._releasing = self._releasing, []
            try:
                if tokens:
                    await self._call("release", self._redis.zrem(self.key, *tokens))
                if anyio.current_time() >= renew_at:
                    renew_at = anyio.current_time() + self.lease / 3
                    await self._renew_held()
            except StoreError as exc:
                self._releasing = tokens + self._releasing  # they expire anyway
                log.warning("limiter %r: %s", self.name, exc)
                await asyncio.sleep(self.poll * 8)

    async def _renew_held(self) -> None:
        held = list(self._held.values())
        if not held:
            return
        args: list[Any] = [round(self.lease * 1000), *held]
        renewed = await self._call("renew", self._renew(keys=[self.key], args=args))
        if renewed < len(held):
            log.warning(
                "limiter %r: %d slot(s) had expired (Redis was unreachable for a lease); the"
                " limit may be exceeded until they are released",
                self.name,
                len(held) - int(renewed),
            )

    async def _call(self, operation: str, work: Awaitable[T]) -> T:
        where = f"Redis at {self.url} (limiter {self.name!r})"
        return await bounded(work, self.timeout, where, operation)
