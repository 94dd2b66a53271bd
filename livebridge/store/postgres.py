"""``PostgresStore``: conversations in PostgreSQL, whose commits survive a failover.

Redis replicates asynchronously: a lease epoch or a ``started`` entry it acknowledged can vanish
when a lagging replica is promoted, and a second worker then runs the call again. PostgreSQL
with a synchronous standby acknowledges a commit only once the standby has it, so the promoted
standby knows every lease and every ``started`` entry a worker was told were stored.

Three tables and five functions, all named after ``prefix`` (``livebridge``):

- ``livebridge_conversation``: one row per conversation, never deleted: the lease (``owner``,
  ``expires``), its ``epoch`` (acquisitions so far: it only grows), the newest ``handle`` (the
  ``HandleRecord`` as JSON) and ``keep``, until when the handle and journal are kept;
- ``livebridge_call``: the journal, one row per journaled call. An entry a handle covers, or
  that expired, is marked ``forgotten`` instead of deleted: the table is also the audit trail
  (which calls ran, when, under which fence, with what outcome);
- ``livebridge_acquire``, ``_renew``, ``_release``, ``_write``, ``_load``: each operation is
  one function call, so one round trip and one transaction, like ``RedisStore``'s Lua scripts.
  Expiry is decided by the server's clock.

The store creates them on first use (``migrate=False``: it assumes they exist;
``PostgresStore.schema()`` is the SQL). Every operation is bounded by ``timeout`` seconds,
not retried, and fails as ``StoreUnavailableError`` naming the operation; an operation that
overstays is abandoned to a task of its own (psycopg waits for a cancelled query to end).
psycopg 3 and its pool are imported on first use (the ``livebridge-voice[postgres]`` extra).
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from livebridge.errors import ConversationBusyError, LeaseLostError, StoreUnavailableError
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
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

T = TypeVar("T")

_encode = msgspec.json.Encoder().encode
_PREFIX = re.compile(r"[a-z_][a-z0-9_]{0,39}")

# ``{p}`` is the prefix. Times in milliseconds; ``now`` is the server's clock. The fencing rule of
# ``_write`` is ``MemoryStore._fenced``'s: this lease live → write; nobody holds it and nobody
# acquired it since this epoch → -1 (lapsed); else 0 (lost for good).
_SCHEMA = """
CREATE TABLE IF NOT EXISTS {p}_conversation (
    conversation text PRIMARY KEY,
    owner text,
    epoch bigint NOT NULL DEFAULT 0,
    expires timestamptz NOT NULL DEFAULT clock_timestamp(),
    handle text,
    keep timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS {p}_call (
    id bigserial PRIMARY KEY,
    conversation text NOT NULL,
    call_id text NOT NULL,
    name text NOT NULL,
    state text NOT NULL,
    epoch bigint NOT NULL,
    fence bigint NOT NULL,
    owner text NOT NULL,
    idempotency_key text,
    kind text,
    started_at timestamptz NOT NULL,
    settled_at timestamptz,
    written_at timestamptz NOT NULL,
    forgotten boolean NOT NULL DEFAULT false,
    entry text NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS {p}_call_live
    ON {p}_call (conversation, call_id) WHERE NOT forgotten;
CREATE INDEX IF NOT EXISTS {p}_call_started ON {p}_call (started_at);

CREATE OR REPLACE FUNCTION {p}_expired(conv text, now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE {p}_conversation SET handle = NULL WHERE conversation = conv AND keep <= now
        AND handle IS NOT NULL;
    UPDATE {p}_call SET forgotten = true WHERE conversation = conv AND NOT forgotten
        AND EXISTS (SELECT 1 FROM {p}_conversation c WHERE c.conversation = conv
                    AND c.keep <= now);
END $$;

CREATE OR REPLACE FUNCTION {p}_acquire(
    conv text, who text, ttl_ms bigint, since bigint,
    OUT status int, OUT epoch bigint, OUT holder text, OUT left_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
    cur {p}_conversation%ROWTYPE;
    now timestamptz := clock_timestamp();
BEGIN
    INSERT INTO {p}_conversation (conversation) VALUES (conv) ON CONFLICT DO NOTHING;
    SELECT * INTO cur FROM {p}_conversation c WHERE c.conversation = conv FOR UPDATE;
    IF cur.owner IS NOT NULL AND cur.owner <> who AND cur.expires > now THEN
        IF since IS NOT NULL THEN status := -1; RETURN; END IF;
        status := 0; holder := cur.owner;
        left_ms := ceil(extract(epoch FROM cur.expires - now) * 1000);
        RETURN;
    END IF;
    IF since IS NOT NULL AND cur.epoch <> 0 AND cur.epoch <> since THEN
        status := -1; RETURN;
    END IF;
    PERFORM {p}_expired(conv, now);
    epoch := greatest(cur.epoch, coalesce(since, 0)) + 1;
    UPDATE {p}_conversation c SET owner = who, epoch = {p}_acquire.epoch,
        expires = now + ttl_ms * interval '1 millisecond'
        WHERE c.conversation = conv;
    status := 1;
END $$;

CREATE OR REPLACE FUNCTION {p}_renew(
    conv text, who text, fence bigint, ttl_ms bigint, keep_ms bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    now timestamptz := clock_timestamp();
BEGIN
    PERFORM 1 FROM {p}_conversation c WHERE c.conversation = conv AND c.owner = who
        AND c.epoch = fence AND c.expires > now FOR UPDATE;
    IF NOT FOUND THEN RETURN false; END IF;
    PERFORM {p}_expired(conv, now);
    UPDATE {p}_conversation c SET expires = now + ttl_ms * interval '1 millisecond',
        keep = now + keep_ms * interval '1 millisecond' WHERE c.conversation = conv;
    RETURN true;
END $$;

CREATE OR REPLACE FUNCTION {p}_release(conv text, who text, fence bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE {p}_conversation c SET owner = NULL, expires = clock_timestamp()
        WHERE c.conversation = conv AND c.owner = who AND c.epoch = fence
        AND c.expires > clock_timestamp();
END $$;

CREATE OR REPLACE FUNCTION {p}_write(
    conv text, who text, fence bigint, keep_ms bigint, new_handle text, forget text[],
    entries text[]) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    cur {p}_conversation%ROWTYPE;
    now timestamptz := clock_timestamp();
    raw text;
    e jsonb;
BEGIN
    SELECT * INTO cur FROM {p}_conversation c WHERE c.conversation = conv FOR UPDATE;
    IF NOT FOUND THEN RETURN -1; END IF;
    IF cur.owner IS DISTINCT FROM who OR cur.epoch <> fence OR cur.expires <= now THEN
        IF (cur.owner IS NULL OR cur.expires <= now) AND cur.epoch = fence THEN
            RETURN -1;
        END IF;
        RETURN 0;
    END IF;
    PERFORM {p}_expired(conv, now);
    IF new_handle IS NOT NULL THEN
        UPDATE {p}_conversation c SET handle = new_handle WHERE c.conversation = conv;
    END IF;
    IF cardinality(forget) > 0 THEN
        UPDATE {p}_call j SET forgotten = true WHERE j.conversation = conv
            AND NOT j.forgotten AND j.call_id = ANY(forget);
    END IF;
    FOREACH raw IN ARRAY entries LOOP
        e := raw::jsonb;
        INSERT INTO {p}_call AS j (conversation, call_id, name, state, epoch, fence, owner,
            idempotency_key, kind, started_at, settled_at, written_at, entry)
        VALUES (conv, e->>'call_id', e->>'name', e->>'state', (e->>'epoch')::bigint, fence,
            e->>'owner', e->>'key', e->>'kind', to_timestamp((e->>'started_at')::float8),
            to_timestamp((e->>'settled_at')::float8), now, raw)
        ON CONFLICT (conversation, call_id) WHERE NOT forgotten DO UPDATE SET
            name = excluded.name, state = excluded.state, epoch = excluded.epoch,
            owner = excluded.owner, idempotency_key = excluded.idempotency_key,
            kind = excluded.kind, started_at = excluded.started_at,
            settled_at = excluded.settled_at, written_at = now, entry = excluded.entry;
    END LOOP;
    IF new_handle IS NOT NULL OR cardinality(entries) > 0 THEN
        UPDATE {p}_conversation c SET keep = now + keep_ms * interval '1 millisecond'
            WHERE c.conversation = conv;
    END IF;
    RETURN 1;
END $$;

CREATE OR REPLACE FUNCTION {p}_load(conv text, OUT handle text, OUT entries text[])
LANGUAGE sql STABLE AS $$
    SELECT c.handle, ARRAY(SELECT j.entry FROM {p}_call j WHERE j.conversation = conv
                           AND NOT j.forgotten ORDER BY j.started_at, j.id)
    FROM {p}_conversation c WHERE c.conversation = conv AND c.keep > clock_timestamp()
$$;
"""


def schema(prefix: str = "livebridge") -> str:
    """The SQL that creates ``PostgresStore``'s tables and functions (idempotent)."""
    if not _PREFIX.fullmatch(prefix):
        raise ValueError(
            f"prefix {prefix!r} must be a lower-case SQL identifier (letters, digits, _)"
        )
    return _SCHEMA.replace("{p}", prefix)


class PostgresStore:
    """A ``Store`` in PostgreSQL at ``dsn`` (a libpq URL or ``key=value`` string; several
    hosts with ``target_session_attrs=read-write`` follow a failover), tables under ``prefix``.

    ``timeout`` bounds each operation (seconds); ``handle_ttl`` is how long a handle and the
    journal beside it are kept after their owner's last write or heartbeat (longer than
    ``lease_ttl``, see ``Store``); ``pool_size`` caps the connections this process opens.
    """

    def __init__(
        self,
        dsn: str,
        *,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        handle_ttl: float = DEFAULT_HANDLE_TTL,
        timeout: float = 1.0,
        prefix: str = "livebridge",
        migrate: bool = True,
        pool_size: int = 8,
    ) -> None:
        if not timeout > 0:
            raise ValueError("timeout must be positive")
        if pool_size < 1:
            raise ValueError("pool_size must be at least 1")
        check_ttls(handle_ttl, lease_ttl)
        self._schema = schema(prefix)
        self.dsn = dsn
        self.prefix = prefix
        self.timeout = timeout
        self.handle_ttl = handle_ttl
        self.lease_ttl = lease_ttl
        self.migrate = migrate
        self.pool_size = pool_size
        self._keep_ms = _ms(handle_ttl)
        self._pool: AsyncConnectionPool[Any] | None = None
        self._ready = False
        self._opening: asyncio.Lock | None = None
        self._abandoned: set[asyncio.Task[Any]] = set()
        self._where = f"PostgreSQL at {_redacted(dsn)}"

    @staticmethod
    def schema(prefix: str = "livebridge") -> str:
        """The SQL of the tables and functions, for teams that migrate by hand."""
        return schema(prefix)

    async def acquire(
        self, conversation: str, owner: str, ttl: float, *, since: Lease | None = None
    ) -> Lease:
        sql = f"SELECT * FROM {self.prefix}_acquire(%s, %s, %s, %s)"
        args = (conversation, owner, _ms(ttl), None if since is None else since.epoch)
        status, epoch, holder, left_ms = await self._one("acquire", sql, args)
        if status == 1:
            return Lease(owner, int(epoch))
        if status == -1:
            raise LeaseLostError(
                f"{lost(conversation, owner)}: another worker acquired it since epoch"
                f" {since.epoch if since else 0}"
            )
        left = max(int(left_ms), 0) / 1000
        raise ConversationBusyError(
            f"conversation {conversation!r} is held by {holder} for another {left:.1f} s;"
            " retry after that, or route it to that worker",
            owner=str(holder),
            retry_after=left,
        )

    async def renew(self, conversation: str, lease: Lease, ttl: float) -> bool:
        sql = f"SELECT {self.prefix}_renew(%s, %s, %s, %s, %s)"
        args = (conversation, lease.owner, lease.epoch, _ms(ttl), self._keep_ms)
        (held,) = await self._one("renew", sql, args)
        return bool(held)

    async def release(self, conversation: str, lease: Lease) -> None:
        sql = f"SELECT {self.prefix}_release(%s, %s, %s)"
        await self._one("release", sql, (conversation, lease.owner, lease.epoch))

    async def load(self, conversation: str) -> Snapshot:
        sql = f"SELECT * FROM {self.prefix}_load(%s)"
        row = await self._run("load", sql, (conversation,))
        if row is None:
            return Snapshot()
        raw_handle, raw_entries = row
        return Snapshot.decoded(raw_handle, raw_entries or ())

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
        for task in list(self._abandoned):
            task.cancel()
        if self._abandoned:
            await asyncio.wait(self._abandoned, timeout=self.timeout)
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close(timeout=self.timeout)

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
        sql = f"SELECT {self.prefix}_write(%s, %s, %s, %s, %s, %s, %s)"
        args = (
            conversation,
            lease.owner,
            lease.epoch,
            self._keep_ms,
            _encode(handle).decode() if handle is not None else None,
            list(forget),
            [_encode(entry).decode() for entry in entries],
        )
        (written,) = await self._one(operation, sql, args)
        if written == -1:
            raise StoreUnavailableError(lapsed(conversation, lease.owner))
        if not written:
            raise LeaseLostError(lost(conversation, lease.owner))

    async def _one(self, operation: str, sql: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
        row: tuple[Any, ...] | None = await self._run(operation, sql, args)
        if row is None:  # pragma: no cover - every function returns one row
            raise StoreUnavailableError(f"{self._where} returned no row for {operation}")
        return row

    async def _run(self, operation: str, sql: str, args: tuple[Any, ...]) -> Any:
        """One statement on a pooled connection, bounded by ``timeout``."""
        pool = self._pool or await self._open(operation)

        async def work() -> Any:
            async with pool.connection(timeout=self.timeout) as conn:
                if not self._ready:
                    await self._create(conn)
                cursor = await conn.execute(sql, args, prepare=True)
                return await cursor.fetchone()

        return await self._bounded(operation, work, self.timeout)

    async def _create(self, conn: AsyncConnection[Any]) -> None:
        """Create the tables and functions once per store (under an advisory lock: several
        workers may start at once)."""
        if self.migrate:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.prefix,))
                exists = await conn.execute(
                    "SELECT to_regprocedure(%s) IS NOT NULL",
                    (f"{self.prefix}_load(text)",),
                )
                found = await exists.fetchone()
                if not (found and found[0]):
                    await conn.execute(self._schema.encode())  # several statements, no params
        self._ready = True

    async def _open(self, operation: str) -> AsyncConnectionPool[Any]:
        """The connection pool, opened on first use (in the running event loop)."""
        try:
            from psycopg_pool import AsyncConnectionPool
        except ImportError:  # pragma: no cover - depends on the install
            raise ImportError(
                "PostgresStore needs psycopg 3 and its pool: "
                "pip install 'livebridge-voice[postgres]'"
            ) from None
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._pool is None:
                pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
                    self.dsn,
                    min_size=1,
                    max_size=self.pool_size,
                    open=False,
                    timeout=self.timeout,
                    kwargs={
                        "autocommit": True,
                        "connect_timeout": max(2, math.ceil(self.timeout)),
                        "prepare_threshold": None,
                    },
                )
                await pool.open(wait=False)
                self._pool = pool
            return self._pool

    async def _bounded(self, operation: str, work: Callable[[], Awaitable[T]], seconds: float) -> T:
        """Await ``work`` within ``seconds``; on overstay it is abandoned to its own task
        (cancelled, it may still wait for the server) and the caller gets the error now."""
        from psycopg import Error
        from psycopg_pool import PoolTimeout

        task = asyncio.ensure_future(work())
        try:
            done, _ = await asyncio.wait({task}, timeout=seconds)
        except BaseException:
            task.cancel()
            self._abandon(task)
            raise
        if not done:
            task.cancel()
            self._abandon(task)
            raise StoreUnavailableError(
                f"{self._where} did not answer {operation} within {seconds:g} s"
            )
        try:
            return task.result()
        except (Error, PoolTimeout, OSError) as exc:
            if self._pool is not None:  # drop the other connections to a server that is gone
                self._abandon(asyncio.ensure_future(self._pool.check()))
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise StoreUnavailableError(
                f"{self._where} failed {operation}: {type(exc).__name__}: {text}"
            ) from None

    def _abandon(self, task: asyncio.Task[Any]) -> None:
        self._abandoned.add(task)
        task.add_done_callback(_quietly(self._abandoned))


def _quietly(tasks: set[asyncio.Task[Any]]) -> Callable[[asyncio.Task[Any]], None]:
    def done(task: asyncio.Task[Any]) -> None:
        tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: an abandoned operation's error was reported already

    return done


def _ms(seconds: float) -> int:
    return max(round(seconds * 1000), 1)


def _redacted(dsn: str) -> str:
    """``dsn`` without its password, for error messages."""
    dsn = re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", dsn)
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", dsn)
