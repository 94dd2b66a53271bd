"""What a conversation store keeps, and the protocol every store implements.

Per conversation (an app-chosen id such as ``"user-42"``) a store holds three things:

- the newest resumption **handle**, numbered (``seq``, 1, 2, ...) and with its expiry;
- the call **journal**: one ``Entry`` per journaled call, ``started`` before a non-idempotent
  handler runs and ``settled`` (outcome kind and answer payload) once it is answered. Each entry
  carries the ``epoch``: the ``seq`` of the newest handle when the call began. A handle is only
  issued while no call is pending, so the calls a resumed conversation does *not* know are
  exactly those with ``epoch >= seq`` of the handle it resumes: those are what a new owner must
  consult when the model asks again;
- the **lease**: which worker (``owner``) may run the conversation now, until when, and its
  **epoch**: a counter that grows by one with every acquisition. An owner holds a ``Lease``
  (owner and epoch); a lease that lapsed or was taken is never renewed, so an owner that lost
  it even for a moment acts again only with a new epoch (``acquire(..., since=...)``, which
  refuses when anyone acquired meanwhile).

Every write but the lease's own is *fenced*: it lands only while the writer's owner and epoch
are the stored ones, so a worker that lost its lease (paused, partitioned) can never overwrite
the new owner's state nor start a journaled handler.
Times in records are wall-clock seconds (``time.time()``) for people reading them; expiry is
enforced by the store (Redis TTLs, a monotonic clock in ``MemoryStore``).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol

import msgspec

from livebridge.calls.endings import OutcomeKind

if TYPE_CHECKING:
    pass

#: How long a stored handle (and the journal beside it) lives: the service keeps a handle valid
#: for about two hours after its connection ends.
DEFAULT_HANDLE_TTL = 2 * 3600.0
#: How long a lease lives without a heartbeat; the heartbeat renews it every third of that.
DEFAULT_LEASE_TTL = 10.0

EntryState = Literal["started", "settled"]


class Lease(NamedTuple):
    """A lease as its owner holds it: who, and the epoch it was acquired with."""

    owner: str
    epoch: int


def check_ttls(handle_ttl: float, lease_ttl: float) -> None:
    """A handle must outlive the lease: a takeover waits out the lease, then resumes it."""
    if not (handle_ttl > 0 and lease_ttl > 0):
        raise ValueError("handle_ttl and lease_ttl must be positive")
    if handle_ttl <= lease_ttl:
        raise ValueError(
            f"handle_ttl ({handle_ttl:g} s) must be longer than lease_ttl ({lease_ttl:g} s):"
            " a worker that takes over waits out the lease, and the handle and journal must"
            " still be there"
        )


class HandleRecord(msgspec.Struct, frozen=True):
    """The newest resumable handle of a conversation and its number within it."""

    handle: str
    seq: int
    stored_at: float
    owner: str = ""


class Entry(msgspec.Struct, frozen=True):
    """One journaled call.

    ``request`` identifies the request (tool name + canonical arguments, ``request_digest``),
    ``key`` its idempotency key (``key_digest``) if the tool has one. ``kind`` and ``response``
    are the outcome and the exact answer payload once ``settled``.
    """

    call_id: str
    name: str
    request: str
    state: EntryState
    epoch: int
    owner: str
    started_at: float
    key: str | None = None
    settled_at: float | None = None
    kind: OutcomeKind | None = None
    response: dict[str, object] | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a new owner reads when it takes a conversation: the handle and the journal."""

    handle: HandleRecord | None = None
    entries: list[Entry] = field(default_factory=list)

    @classmethod
    def decoded(
        cls, raw_handle: bytes | str | None, raw_entries: Iterable[bytes | str]
    ) -> Snapshot:
        """From the JSON a shared store keeps: the handle, if any, and the entries in the order
        their calls started."""
        handle = _decode_handle(raw_handle) if raw_handle else None
        entries = sorted(map(_decode_entry, raw_entries), key=lambda entry: entry.started_at)
        return cls(handle, entries)


class Store(Protocol):
    """Where conversations outlive a process. Every method raises ``StoreUnavailableError``
    when the store cannot answer; ``MemoryStore`` and ``RedisStore`` implement it.

    ``lease_ttl`` is how long a session's lease lives without a heartbeat: how soon another
    worker can take over a conversation whose worker died.
    """

    lease_ttl: float

    async def acquire(
        self, conversation: str, owner: str, ttl: float, *, since: Lease | None = None
    ) -> Lease:
        """Take the lease for ``ttl`` seconds with a new epoch (``owner`` may hold it already).

        Raises ``ConversationBusyError`` while another owner's lease is live. With ``since``
        (the lease this owner lost), it is taken only if nobody acquired it since that epoch
        (or the store lost every record of it), else ``LeaseLostError``.
        """
        ...

    async def renew(self, conversation: str, lease: Lease, ttl: float) -> bool:
        """Extend ``lease`` by ``ttl`` seconds, and the handle and journal by the store's
        ``handle_ttl``. False when the stored lease is not this one (it lapsed or was taken):
        never re-taken here."""
        ...

    async def release(self, conversation: str, lease: Lease) -> None:
        """Give the lease up if ``lease`` is still the stored one."""
        ...

    async def load(self, conversation: str) -> Snapshot:
        """The stored handle (None when absent or expired) and every journal entry."""
        ...

    async def begin(self, conversation: str, lease: Lease, entry: Entry) -> None:
        """Journal ``entry`` now, before its handler runs (fenced by the lease).

        Raises ``LeaseLostError`` when ``lease`` is not the stored one and can never be again,
        ``StoreUnavailableError`` when it lapsed and nobody acquired it since.
        """
        ...

    async def write(
        self,
        conversation: str,
        lease: Lease,
        *,
        handle: HandleRecord | None = None,
        entries: Sequence[Entry] = (),
        forget: Sequence[str] = (),
    ) -> None:
        """One batch of deferred writes (fenced by the lease): store ``handle`` if given, then
        remove the ``forget`` call ids from the journal, then upsert ``entries``."""
        ...

    async def aclose(self) -> None:
        """Close connections; the stored state stays."""
        ...


def new_owner() -> str:
    """A lease owner token unique to this process and session: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def lapsed(conversation: str, owner: str) -> str:
    """Why a fenced write was refused when no owner holds the lease."""
    return (
        f"the lease of {owner} on conversation {conversation!r} lapsed (the store was"
        " unreachable or restarted); the heartbeat acquires it again if nobody else did"
    )


def lost(conversation: str, owner: str) -> str:
    """Why a fenced write was refused for good."""
    return f"this worker ({owner}) no longer holds the lease on conversation {conversation!r}"


def request_digest(name: str, canonical_args: bytes) -> str:
    """A short stable id of a request (tool name and canonical JSON arguments)."""
    return hashlib.blake2b(name.encode() + b"\0" + canonical_args, digest_size=12).hexdigest()


def key_digest(name: str, key: Hashable) -> str:
    """A stable id of an idempotency key across processes (from its ``repr``).

    Keys should be strings, numbers or tuples of them, whose ``repr`` is stable.
    """
    return hashlib.blake2b(f"{name}\0{key!r}".encode(), digest_size=12).hexdigest()


_decode_handle = msgspec.json.Decoder(HandleRecord).decode
_decode_entry = msgspec.json.Decoder(Entry).decode
