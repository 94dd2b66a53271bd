"""``RedisStore``: conversations shared by every worker that reaches one Redis.

Keys of one conversation share a hash tag, so they live on one Redis Cluster slot and one Lua
script can touch them all: ``{prefix}:{<conversation>}:lease`` (``"<epoch> <owner>"``, with the
lease TTL), ``...:epoch`` (the acquisition counter), ``...:handle`` (the ``HandleRecord`` as
JSON) and ``...:journal`` (a hash of call id → ``Entry`` JSON). Every write and every renewal
resets the epoch, handle and journal TTLs to ``handle_ttl``: nothing lives forever, and an
abandoned conversation disappears ``handle_ttl`` after its owner's last heartbeat.

Atomicity: acquiring, renewing and releasing the lease, and every journal or handle write, are
Lua scripts, each one round trip. Writes and renewals check the stored owner *and* epoch in the
same script (fencing), so a worker that lost its lease, even for a moment, can never overwrite
the new owner nor renew its way back.

Redis Sentinel: a ``redis+sentinel://host:port[,host:port...]/service[/db]`` URL asks the
sentinels which server is the master of ``service`` (redis-py's ``Sentinel``), and asks again
when a connection breaks or finds a demoted master, so the store follows a failover. Redis
replicates asynchronously: writes the old master acknowledged but had not yet sent to the
promoted replica are lost, a lease epoch or a ``started`` entry among them (docs/store.md).

Slowness and failure: every operation is bounded by ``timeout`` seconds (socket and overall),
is not retried (the caller decides: a call is refused, a heartbeat tries again) and fails as
``StoreUnavailableError`` naming the operation. redis-py is imported on first use (the
``livebridge-voice[redis]`` extra).

Eviction: the first acquisition, and the first after any failed operation (the Redis may have
been restarted or replaced), reads the server's ``maxmemory-policy`` and refuses one that may
evict keys (``store/eviction.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import msgspec

from livebridge.errors import ConversationBusyError, LeaseLostError, StoreUnavailableError
from livebridge.store import eviction
from livebridge.store.base import (
    DEFAULT_HANDLE_TTL,
    DEFAULT_LEASE_TTL,
    Entry,
    HandleRecord,
    Lease,
    Snapshot,
    check_ttls,
    lapsed,
    lost,
)

if TYPE_CHECKING:
    import redis.asyncio

#: What a missing redis-py is answered with.
NEEDS_REDIS = "RedisStore needs redis-py: pip install 'livebridge-voice[redis]'"

T = TypeVar("T")

_encode = msgspec.json.Encoder().encode

# The lease's value is "<epoch> <owner>"; ``...:epoch`` counts acquisitions (kept as long as a
# handle). KEYS: lease, epoch. ARGV: owner, ttl ms, keep ms, since epoch or ''.
# → {1, epoch} taken, {0, holder, ms left} another owner's is live, {-1} lost since ``since``.
_ACQUIRE = """
local holder = redis.call('GET', KEYS[1])
if holder ~= false then
  local by = string.sub(holder, string.find(holder, ' ', 1, true) + 1)
  if by ~= ARGV[1] then
    if ARGV[4] ~= '' then return {-1} end
    return {0, by, redis.call('PTTL', KEYS[1])}
  end
end
local epoch
if ARGV[4] ~= '' then
  local counter = redis.call('GET', KEYS[2])
  if counter ~= false and counter ~= ARGV[4] then return {-1} end
  epoch = tonumber(ARGV[4]) + 1
  redis.call('SET', KEYS[2], epoch, 'PX', ARGV[3])
else
  epoch = redis.call('INCR', KEYS[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
redis.call('SET', KEYS[1], epoch .. ' ' .. ARGV[1], 'PX', ARGV[2])
return {1, epoch}
"""
# KEYS: lease, epoch, handle, journal. ARGV: lease value, ttl ms, keep ms. → 1 renewed (the
# handle and journal kept ``keep`` ms more), 0 the stored lease is not this one.
_RENEW = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
redis.call('PEXPIRE', KEYS[4], ARGV[3])
return 1
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""
# KEYS: lease, epoch, handle, journal. ARGV: lease value, epoch, keep ms, handle JSON or '',
# n forget, forget ids..., then field, value pairs. → 1 written, -1 nobody holds the lease and
# nobody acquired it since this epoch, 0 lost for good.
_WRITE = """
local holder = redis.call('GET', KEYS[1])
if holder ~= ARGV[1] then
  if holder ~= false then return 0 end
  local counter = redis.call('GET', KEYS[2])
  if counter == false or counter == ARGV[2] then return -1 end
  return 0
end
if ARGV[4] ~= '' then redis.call('SET', KEYS[3], ARGV[4], 'PX', ARGV[3]) end
local forget = tonumber(ARGV[5])
local i = 6
if forget > 0 then
  redis.call('HDEL', KEYS[4], unpack(ARGV, i, i + forget - 1))
  i = i + forget
end
if #ARGV >= i then
  redis.call('HSET', KEYS[4], unpack(ARGV, i, #ARGV))
  redis.call('PEXPIRE', KEYS[4], ARGV[3])
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
        raise ImportError(
            "RedisStore needs redis-py: pip install 'livebridge-voice[redis]'"
        ) from None
    return redis.asyncio.Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
        health_check_interval=0,
    )


#: The URL scheme of a store found through Redis Sentinel.
SENTINEL_SCHEME = "redis+sentinel://"


def sentinel(url: str, timeout: float) -> redis.asyncio.Redis:
    """A client of the master that the sentinels in ``url`` name
    (``redis+sentinel://[[user]:password@]host:port[,host:port...]/service[/db]``; the password
    is the master's), failing fast like ``connect``'s."""
    try:
        from redis.asyncio.retry import Retry
        from redis.asyncio.sentinel import Sentinel
        from redis.backoff import NoBackoff
    except ImportError:  # pragma: no cover - depends on the install
        raise ImportError(
            "RedisStore needs redis-py: pip install 'livebridge-voice[redis]'"
        ) from None
    userinfo, _, rest = url.removeprefix(SENTINEL_SCHEME).rpartition("@")
    hosts, _, path = rest.partition("/")
    service, _, db = path.strip("/").partition("/")
    addresses: list[tuple[str, int]] = []
    for address in hosts.split(","):
        host, _, port = address.strip().rpartition(":")
        if not host or not port.isdigit():
            addresses = []
            break
        addresses.append((host, int(port)))
    if not addresses or not service or not (db == "" or db.isdigit()):
        raise ValueError(
            f"{url!r} is not a Sentinel URL: redis+sentinel://host:port[,host:port...]/service[/db]"
        )
    user, _, password = userinfo.partition(":")
    options: dict[str, Any] = {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "retry": Retry(NoBackoff(), 0),
    }
    sentinels = Sentinel(addresses, sentinel_kwargs=dict(options), **options)
    client: redis.asyncio.Redis = sentinels.master_for(
        service,
        db=int(db or 0),
        username=user or None,
        password=password or None,
        health_check_interval=0,
        **options,
    )
    return client


class RedisStore:
    """A ``Store`` in Redis at ``url`` (``redis://host:port/db``, or a Sentinel URL:
    ``redis+sentinel://host:port,host:port/service/db``), keys under ``prefix``.

    ``timeout`` bounds each operation (seconds); ``handle_ttl`` is how long a handle and the
    journal beside it are kept after their owner's last write or heartbeat (longer than
    ``lease_ttl``, see ``Store``). A Redis whose ``maxmemory-policy`` is not ``noeviction``
    (or cannot be read) is refused with ``EvictionPolicyError`` on first use, unless
    ``allow_eviction`` (then it is logged as a warning).
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "livebridge",
        timeout: float = 0.5,
        handle_ttl: float = DEFAULT_HANDLE_TTL,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        allow_eviction: bool = False,
    ) -> None:
        if not timeout > 0:
            raise ValueError("timeout must be positive")
        check_ttls(handle_ttl, lease_ttl)
        self.url = url
        self.prefix = prefix
        self.timeout = timeout
        self.handle_ttl = handle_ttl
        self.lease_ttl = lease_ttl
        self._ttl_ms = round(handle_ttl * 1000)
        if url.startswith(SENTINEL_SCHEME):
            self.redis = sentinel(url, timeout)
        else:
            self.redis = connect(url, timeout)
        self._acquire = self.redis.register_script(_ACQUIRE)
        self._renew = self.redis.register_script(_RENEW)
        self._release = self.redis.register_script(_RELEASE)
        self._write = self.redis.register_script(_WRITE)
        self._direct = _Direct(self.redis)
        self.allow_eviction = allow_eviction
        self._policy_checked = False  # again after any failure: it may be another Redis

    def keys(self, conversation: str) -> tuple[str, str, str, str]:
        """The lease, epoch, handle and journal keys of ``conversation``."""
        base = f"{self.prefix}:{{{conversation}}}"
        return f"{base}:lease", f"{base}:epoch", f"{base}:handle", f"{base}:journal"

    async def acquire(
        self, conversation: str, owner: str, ttl: float, *, since: Lease | None = None
    ) -> Lease:
        if not self._policy_checked:
            policy = await self._run("read maxmemory-policy", eviction.read_policy(self.redis))
            eviction.judge(policy, f"Redis at {self.url}", allow=self.allow_eviction)
            self._policy_checked = True
        keys = list(self.keys(conversation)[:2])
        args: list[str | int] = [
            owner,
            _ms(ttl),
            self._ttl_ms,
            "" if since is None else since.epoch,
        ]
        got = await self._run("acquire", self._acquire(keys=keys, args=args))
        if got[0] == 1:
            return Lease(owner, int(got[1]))
        if got[0] == -1:
            raise LeaseLostError(
                f"{lost(conversation, owner)}: another worker acquired it since epoch"
                f" {since.epoch if since else 0}"
            )
        holder = _text(got[1])
        left = max(int(got[2]), 0) / 1000
        raise ConversationBusyError(
            f"conversation {conversation!r} is held by {holder} for another {left:.1f} s;"
            " retry after that, or route it to that worker",
            owner=holder,
            retry_after=left,
        )

    async def renew(self, conversation: str, lease: Lease, ttl: float) -> bool:
        args: list[str | int] = [_value(lease), _ms(ttl), self._ttl_ms]
        work = self._renew(keys=list(self.keys(conversation)), args=args)
        return bool(await self._run("renew", work))

    async def release(self, conversation: str, lease: Lease) -> None:
        key = self.keys(conversation)[0]
        await self._run("release", self._release(keys=[key], args=[_value(lease)]))

    async def load(self, conversation: str) -> Snapshot:
        _, _, handle_key, journal_key = self.keys(conversation)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.get(handle_key)
            pipe.hgetall(journal_key)
            raw_handle, raw_entries = await self._run("load", pipe.execute())
        return Snapshot.decoded(raw_handle, raw_entries.values())

    async def begin(self, conversation: str, lease: Lease, entry: Entry) -> None:
        await self._fenced("begin", conversation, lease, None, (entry,), ())

    async def write(
        self,
        conversation: str,
        lease: Lease,
        *,
        handle: HandleRecord | None = None,
        entries: Sequence[Entry] = (),
        forget: Sequence[str] = (),
    ) -> None:
        await self._fenced("write", conversation, lease, handle, entries, forget)

    async def aclose(self) -> None:
        await self._direct.aclose()
        await self.redis.aclose()
        manager = getattr(self.redis.connection_pool, "sentinel_manager", None)
        for client in manager.sentinels if manager is not None else ():
            await client.aclose()

    # -- internals -------------------------------------------------------------------------

    async def _fenced(
        self,
        operation: str,
        conversation: str,
        lease: Lease,
        handle: HandleRecord | None,
        entries: Sequence[Entry],
        forget: Sequence[str],
    ) -> None:
        handle_json = _encode(handle) if handle else b""
        args: list[Any] = [_value(lease), lease.epoch, self._ttl_ms, handle_json, len(forget)]
        args += forget
        for entry in entries:
            args += (entry.call_id, _encode(entry))
        keys = list(self.keys(conversation))
        written = await self._run(operation, self._direct.evalsha(self._write, keys, args))
        if written == -1:
            raise StoreUnavailableError(lapsed(conversation, lease.owner))
        if not written:
            raise LeaseLostError(lost(conversation, lease.owner))

    async def _run(self, operation: str, work: Awaitable[T]) -> T:
        try:
            return await bounded(work, self.timeout, f"Redis at {self.url}", operation)
        except StoreUnavailableError:
            self._policy_checked = False
            raise


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
                if not connection.is_connected:  # (a Sentinel's connection asks where, here)
                    await connection.connect()
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
    ``StoreUnavailableError`` naming ``where`` and the operation. (``asyncio.timeout`` rather
    than an anyio scope: this runs once per journaled call; benchmarks/PROFILE.md.)"""
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


def _value(lease: Lease) -> str:
    """The lease key's value for ``lease``."""
    return f"{lease.epoch} {lease.owner}"


def _ms(seconds: float) -> int:
    return max(round(seconds * 1000), 1)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
