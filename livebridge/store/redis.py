"""``RedisStore``: conversations shared by every worker that reaches one Redis.

Keys of one conversation share a hash tag, so they live on one Redis Cluster slot and one Lua
script can touch them all: ``{prefix}:{<conversation>}:lease`` (the owner token, with the lease
TTL), ``...:handle`` (the ``HandleRecord`` as JSON, TTL ``handle_ttl``) and ``...:journal`` (a
hash of call id → ``Entry`` JSON, its TTL reset to ``handle_ttl`` by every write). Nothing lives
forever: an abandoned conversation disappears ``handle_ttl`` after its last write.

Atomicity: acquiring, renewing and releasing the lease, and every journal or handle write, are
Lua scripts, each one round trip. Writes check that the writer still holds the lease in the
same script (fencing), so a worker that lost its lease can never overwrite the new owner.

Slowness and failure: every operation is bounded by ``timeout`` seconds (socket and overall),
is not retried (the caller decides: a call is refused, a heartbeat tries again) and fails as
``StoreUnavailableError`` naming the operation. redis-py is imported on first use (the
``livebridge[redis]`` extra).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import msgspec

from livebridge.errors import ConversationBusyError, LeaseLostError, StoreUnavailableError
from livebridge.store.base import (
    DEFAULT_HANDLE_TTL,
    DEFAULT_LEASE_TTL,
    Entry,
    HandleRecord,
    Snapshot,
    lapsed,
)

if TYPE_CHECKING:
    import redis.asyncio

__all__ = ["RedisStore", "bounded", "connect"]

T = TypeVar("T")

_encode = msgspec.json.Encoder().encode
_decode_handle = msgspec.json.Decoder(HandleRecord).decode
_decode_entry = msgspec.json.Decoder(Entry).decode

# KEYS: lease. ARGV: owner, ttl ms. → {1} taken, or {0, holder, ms left}.
_ACQUIRE = """
local holder = redis.call('GET', KEYS[1])
if holder == false or holder == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1}
end
return {0, holder, redis.call('PTTL', KEYS[1])}
"""
# KEYS: lease, handle. ARGV: owner, ttl ms. → 1 held (renewed, or re-taken while free and the
# newest handle is this owner's or gone), 0 another owner has it or had it since.
_RENEW = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if holder ~= false then return 0 end
local handle = redis.call('GET', KEYS[2])
if handle ~= false then
  local by = cjson.decode(handle).owner
  if by ~= nil and by ~= '' and by ~= ARGV[1] then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""
# KEYS: lease, handle, journal. ARGV: owner, ttl ms, handle JSON or '', n forget, forget ids...,
# then field, value pairs. → 1 written, 0 another owner holds the lease, -1 nobody does.
_WRITE = """
local holder = redis.call('GET', KEYS[1])
if holder == false then return -1 end
if holder ~= ARGV[1] then return 0 end
if ARGV[3] ~= '' then redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[2]) end
local forget = tonumber(ARGV[4])
local i = 5
if forget > 0 then
  redis.call('HDEL', KEYS[3], unpack(ARGV, i, i + forget - 1))
  i = i + forget
end
if #ARGV >= i then
  redis.call('HSET', KEYS[3], unpack(ARGV, i, #ARGV))
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
end
return 1
"""


def connect(url: str, timeout: float) -> redis.asyncio.Redis:
    """A redis-py asyncio client for ``url`` that fails fast instead of retrying."""
    try:
        import redis.asyncio
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff
    except ImportError:  # pragma: no cover - depends on the install
        raise ImportError("RedisStore needs redis-py: pip install 'livebridge[redis]'") from None
    return redis.asyncio.Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
        health_check_interval=0,
    )


class RedisStore:
    """A ``Store`` in Redis at ``url`` (``redis://host:port/db``), keys under ``prefix``.

    ``timeout`` bounds each operation (seconds); ``handle_ttl`` is how long a handle and the
    journal beside it are kept after their last write; ``lease_ttl`` (see ``Store``).
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "livebridge",
        timeout: float = 0.5,
        handle_ttl: float = DEFAULT_HANDLE_TTL,
        lease_ttl: float = DEFAULT_LEASE_TTL,
    ) -> None:
        if not (timeout > 0 and handle_ttl > 0 and lease_ttl > 0):
            raise ValueError("timeout, handle_ttl and lease_ttl must be positive")
        self.url = url
        self.prefix = prefix
        self.timeout = timeout
        self.handle_ttl = handle_ttl
        self.lease_ttl = lease_ttl
        self._ttl_ms = round(handle_ttl * 1000)
        self.redis = connect(url, timeout)
        self._acquire = self.redis.register_script(_ACQUIRE)
        self._renew = self.redis.register_script(_RENEW)
        self._release = self.redis.register_script(_RELEASE)
        self._write = self.redis.register_script(_WRITE)
        self._direct = _Direct(self.redis)

    def keys(self, conversation: str) -> tuple[str, str, str]:
        """The lease, handle and journal keys of ``conversation``."""
        base = f"{self.prefix}:{{{conversation}}}"
        return f"{base}:lease", f"{base}:handle", f"{base}:journal"

    async def acquire(self, conversation: str, owner: str, ttl: float) -> None:
        lease = self.keys(conversation)[0]
        got = await self._run("acquire", self._acquire(keys=[lease], args=[owner, _ms(ttl)]))
        if got[0] != 1:
            holder = _text(got[1])
            left = max(int(got[2]), 0) / 1000
            raise ConversationBusyError(
                f"conversation {conversation!r} is held by {holder} for another {left:.1f} s;"
                " retry after that, or route it to that worker",
                owner=holder,
                retry_after=left,
            )

    async def renew(self, conversation: str, owner: str, ttl: float) -> bool:
        keys = list(self.keys(conversation)[:2])
        return bool(await self._run("renew", self._renew(keys=keys, args=[owner, _ms(ttl)])))

    async def release(self, conversation: str, owner: str) -> None:
        lease = self.keys(conversation)[0]
        await self._run("release", self._release(keys=[lease], args=[owner]))

    async def load(self, conversation: str) -> Snapshot:
        _, handle_key, journal_key = self.keys(conversation)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.get(handle_key)
            pipe.hgetall(journal_key)
            raw_handle, raw_entries = await self._run("load", pipe.execute())
        handle = _decode_handle(raw_handle) if raw_handle else None
        entries = [_decode_entry(value) for value in raw_entries.values()]
        entries.sort(key=lambda entry: entry.started_at)
        return Snapshot(handle, entries)

    async def begin(self, conversation: str, owner: str, entry: Entry) -> None:
        await self._fenced("begin", conversation, owner, None, (entry,), ())

    async def write(
        self,
        conversation: str,
        owner: str,
        *,
        handle: HandleRecord | None = None,
        entries: Sequence[Entry] = (),
        forget: Sequence[str] = (),
    ) -> None:
        await self._fenced("write", conversation, owner, handle, entries, forget)

    async def aclose(self) -> None:
        await self._direct.aclose()
        await self.redis.aclose()

    # -- internals -------------------------------------------------------------------------

    async def _fenced(
        self,
        operation: str,
        conversation: str,
        owner: str,
        handle: HandleRecord | None,
        entries: Sequence[Entry],
        forget: Sequence[str],
    ) -> None:
        args: list[Any] = [owner, self._ttl_ms, _encode(handle) if handle else b"", len(forget)]
        args += forget
        for entry in entries:
            args += (entry.call_id, _encode(entry))
        keys = list(self.keys(conversation))
        written = await self._run(operation, self._direct.evalsha(self._write, keys, args))
        if written == -1:
            raise StoreUnavailableError(lapsed(conversation, owner))
        if not written:
            raise LeaseLostError(
                f"this worker ({owner}) no longer holds the lease on conversation {conversation!r}"
            )

    async def _run(self, operation: str, work: Awaitable[T]) -> T:
        return await bounded(work, self.timeout, f"Redis at {self.url}", operation)


class _Direct:
    """The per-call journal writes, on connections of their own.

    They skip the client's pool lock and retry layers, about a third of the round trip on
    loopback, and its socket timeouts (a task per send, a timer per read): ``bounded`` times
    the whole operation. At most ``size`` are open at once (more writers wait, on an asyncio
    semaphore that, unlike anyio's, does not yield when a slot is free); one that failed or was
    interrupted mid-reply is closed, never reused.
    """

    def __init__(self, client: redis.asyncio.Redis, size: int = 8) -> None:
        self._pool = client.connection_pool
        self._slots = asyncio.Semaphore(size)
        self._idle: list[Any] = []

    async def evalsha(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        from redis.exceptions import NoScriptError

        command = _pack("EVALSHA", script.sha, len(keys), *keys, *args)
        async with self._slots:
            connection = self._idle.pop() if self._idle else self._connection()
            try:
                await connection.send_packed_command(command)
                try:
                    reply = await connection.read_response()
                except NoScriptError:  # a restarted Redis forgot it
                    await connection.send_command("SCRIPT", "LOAD", script.script)
                    await connection.read_response()
                    await connection.send_packed_command(command)
                    reply = await connection.read_response()
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await connection.disconnect()
                raise
            self._idle.append(connection)
            return reply

    def _connection(self) -> Any:
        connection = self._pool.make_connection()  # type: ignore[no-untyped-call]
        connection.socket_timeout = None  # ``bounded`` times each operation whole
        return connection

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            await connection.disconnect()


async def bounded(work: Awaitable[T], seconds: float, where: str, operation: str) -> T:
    """Await one Redis operation within ``seconds``; any failure is one clear
    ``StoreUnavailableError`` naming ``where`` and the operation. (``asyncio.timeout``: a
    third of the cost of an anyio scope on this path, which runs once per journaled call.)"""
    from redis.exceptions import RedisError

    try:
        async with asyncio.timeout(seconds):
            return await work
    except TimeoutError:
        raise StoreUnavailableError(
            f"{where} did not answer {operation} within {seconds:g} s"
        ) from None
    except (RedisError, OSError) as exc:
        raise StoreUnavailableError(
            f"{where} failed {operation}: {type(exc).__name__}: {exc}"
        ) from None


def _pack(*args: Any) -> bytes:
    """One RESP command (redis-py's packer is general and slower; these are bytes, str, int)."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def _ms(seconds: float) -> int:
    return max(round(seconds * 1000), 1)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
