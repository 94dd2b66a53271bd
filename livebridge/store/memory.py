"""``MemoryStore``: the in-process default, for one-process deployments and tests.

It keeps the same promises as ``RedisStore`` within one process (leases, fencing, expiry), so
the session code has one path. It is bounded:

- at most ``max_conversations`` conversations; when a new one would exceed it, the least
  recently used conversation *without a live lease* is forgotten (its handle and journal);
  when every conversation has a live lease, ``acquire`` raises ``StoreUnavailableError``;
- at most ``max_entries`` journal entries per conversation; past it the oldest is forgotten
  (a session trims its own settled entries each time a handle is stored, so this is reached
  only by a conversation that never gets a handle).

Handles expire ``handle_ttl`` seconds after they were stored or renewed, the journal
``handle_ttl`` after its last write or renewal, like Redis keys with a TTL. The lease epoch
grows with every acquisition for as long as the conversation is kept.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

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


@dataclass(slots=True)
class _Conversation:
    owner: str | None = None
    lease_until: float = 0.0
    epoch: int = 0  # acquisitions so far; the live lease's epoch
    fresh: bool = True  # never acquired (new, or forgotten and made again)
    handle: HandleRecord | None = None
    handle_until: float = 0.0
    journal: OrderedDict[str, Entry] = field(default_factory=OrderedDict)
    journal_until: float = 0.0


class MemoryStore:
    """A ``Store`` in this process's memory (see the module docstring for its bounds)."""

    def __init__(
        self,
        *,
        max_conversations: int = 10_000,
        max_entries: int = 4096,
        handle_ttl: float = DEFAULT_HANDLE_TTL,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_conversations < 1 or max_entries < 1:
            raise ValueError("max_conversations and max_entries must be at least 1")
        check_ttls(handle_ttl, lease_ttl)
        self.max_conversations = max_conversations
        self.max_entries = max_entries
        self.handle_ttl = handle_ttl
        self.lease_ttl = lease_ttl
        self._clock = clock
        self._conversations: OrderedDict[str, _Conversation] = OrderedDict()

    def __len__(self) -> int:
        return len(self._conversations)

    async def acquire(
        self, conversation: str, owner: str, ttl: float, *, since: Lease | None = None
    ) -> Lease:
        now = self._clock()
        state = self._get(conversation, create=True, now=now)
        assert state is not None
        taken = state.owner not in (None, owner) and state.lease_until > now
        if since is not None and (taken or not (state.fresh or state.epoch == since.epoch)):
            raise LeaseLostError(
                f"{lost(conversation, owner)}: another worker acquired it since epoch {since.epoch}"
            )
        if taken:
            left = state.lease_until - now
            raise ConversationBusyError(
                f"conversation {conversation!r} is held by {state.owner} for another "
                f"{left:.1f} s; retry after that, or route it to that worker",
                owner=state.owner or "",
                retry_after=left,
            )
        if since is not None:
            state.epoch = max(state.epoch, since.epoch)
        state.epoch += 1
        state.fresh = False
        state.owner, state.lease_until = owner, now + ttl
        return Lease(owner, state.epoch)

    async def renew(self, conversation: str, lease: Lease, ttl: float) -> bool:
        now = self._clock()
        state = self._get(conversation, create=False, now=now)
        if state is None or not _holds(state, lease, now):
            return False
        state.lease_until = now + ttl
        state.journal_until = state.handle_until = now + self.handle_ttl
        return True

    async def release(self, conversation: str, lease: Lease) -> None:
        state = self._conversations.get(conversation)
        if state is not None and _holds(state, lease, self._clock()):
            state.owner, state.lease_until = None, 0.0

    async def load(self, conversation: str) -> Snapshot:
        now = self._clock()
        state = self._get(conversation, create=False, now=now)
        if state is None:
            return Snapshot()
        return Snapshot(state.handle, list(state.journal.values()))

    async def begin(self, conversation: str, lease: Lease, entry: Entry) -> None:
        state = self._fenced(conversation, lease)
        self._put(state, entry)

    async def write(
        self,
        conversation: str,
        lease: Lease,
        *,
        handle: HandleRecord | None = None,
        entries: Sequence[Entry] = (),
        forget: Sequence[str] = (),
    ) -> None:
        state = self._fenced(conversation, lease)
        if handle is not None:
            state.handle, state.handle_until = handle, self._clock() + self.handle_ttl
        for call_id in forget:
            state.journal.pop(call_id, None)
        for entry in entries:
            self._put(state, entry)

    async def aclose(self) -> None:
        return None

    # -- internals -------------------------------------------------------------------------

    def _fenced(self, conversation: str, lease: Lease) -> _Conversation:
        now = self._clock()
        state = self._get(conversation, create=False, now=now)
        if state is not None and _holds(state, lease, now):
            return state
        free = state is None or state.owner is None or state.lease_until <= now
        if free and (state is None or state.epoch == lease.epoch):
            raise StoreUnavailableError(lapsed(conversation, lease.owner))
        raise LeaseLostError(lost(conversation, lease.owner))

    def _put(self, state: _Conversation, entry: Entry) -> None:
        journal = state.journal
        journal.pop(entry.call_id, None)
        journal[entry.call_id] = entry
        while len(journal) > self.max_entries:
            journal.popitem(last=False)
        state.journal_until = self._clock() + self.handle_ttl

    def _get(self, conversation: str, *, create: bool, now: float) -> _Conversation | None:
        conversations = self._conversations
        state = conversations.get(conversation)
        if state is not None:
            conversations.move_to_end(conversation)
            if state.handle is not None and state.handle_until <= now:
                state.handle = None
            if state.journal and state.journal_until <= now:
                state.journal.clear()
            return state
        if not create:
            return None
        if len(conversations) >= self.max_conversations:
            self._evict(now)
        state = conversations[conversation] = _Conversation()
        return state

    def _evict(self, now: float) -> None:
        """Forget the least recently used conversation without a live lease."""
        for name, state in self._conversations.items():
            if state.owner is None or state.lease_until <= now:
                del self._conversations[name]
                return
        raise StoreUnavailableError(
            f"the memory store is full: all {self.max_conversations} conversations have a live"
            " lease; raise max_conversations or use a RedisStore"
        )


def _holds(state: _Conversation, lease: Lease, now: float) -> bool:
    """``lease`` is the live one: its owner and its epoch."""
    return state.owner == lease.owner and state.epoch == lease.epoch and state.lease_until > now
