"""Where conversations outlive a process, a public module: resumption handles, a call journal,
leases, limits.

``MemoryStore`` (the default: one process), ``RedisStore`` (many workers sharing one Redis) and
``PostgresStore`` (many workers sharing PostgreSQL: its commits survive a failover) implement
the ``Store`` protocol (its records: ``Lease``, ``HandleRecord``, ``Entry``, ``Snapshot``);
``LiveSession.connect(..., store=..., conversation=...)`` uses one. ``RedisLimiter`` caps
concurrent handlers across processes (``CallPolicy(limiter=...)``). The Redis classes import
redis-py on first use (``pip install 'livebridge-voice[redis]'``), ``PostgresStore`` psycopg
(``livebridge-voice[postgres]``). The failover guarantees are in docs/store.md; the modules
that keep them (the journal, the connector that wraps a vendor's) are internal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from livebridge.lazy import exports
from livebridge.store.base import (
    Entry,
    HandleRecord,
    Lease,
    Snapshot,
    Store,
)
from livebridge.store.memory import MemoryStore

if TYPE_CHECKING:
    from livebridge.store.limiter import RedisLimiter
    from livebridge.store.postgres import PostgresStore
    from livebridge.store.redis import RedisStore

__all__ = [
    "Entry",
    "HandleRecord",
    "Lease",
    "MemoryStore",
    "PostgresStore",
    "RedisLimiter",
    "RedisStore",
    "Snapshot",
    "Store",
]

_default: list[MemoryStore] = []


def default_store() -> MemoryStore:
    """The process-wide ``MemoryStore`` a session uses when given a ``conversation`` only."""
    if not _default:
        _default.append(MemoryStore())
    return _default[0]


#: The stores and the limiter that need redis-py or psycopg, read on first access.
_HOMES: dict[str, str] = {
    "PostgresStore": "livebridge.store.postgres",
    "RedisLimiter": "livebridge.store.limiter",
    "RedisStore": "livebridge.store.redis",
}

__getattr__, __dir__ = exports(__name__, _HOMES, __all__)
