"""The call journal of one conversation, as the dispatcher uses it (``CallJournal``).

Which calls are journaled (a tool is *idempotent* when it is registered ``idempotent=True`` or
with an ``idempotency_key``: running it twice does no harm, or its backend dedupes by the key):

- a non-idempotent call is journaled ``started`` **before** its handler runs, and the handler
  runs only once that write is confirmed; if the store fails or is slower than its timeout, the
  call is answered ``store_unavailable`` (retryable) and the handler does not run;
- a non-idempotent or keyed call is journaled ``settled`` with its answer **after** it is
  answered. That write is deferred (batched in the background, off the answer's critical
  path). Safe because losing it can only make a re-issue after a crash find ``started``
  without a result and get ``outcome_unknown``: never a second run;
- idempotent calls without a key are not journaled: after a failover they simply run again.

After a takeover (``restore``), the entries the resumed conversation cannot know (``epoch`` at
or after the resumed handle's ``seq``) are *candidates*. A call that matches one, by the same
call id, else the same idempotency key, else the same tool and canonical arguments (the
re-issue notion of ``livebridge.calls.repeats``), is answered from it; repeats get the same answer
until the next handle (then the model has seen it, and an identical call is a new request):

- a recorded successful answer → that answer (``dedup="journal"``); a recorded failure → the
  call runs again (a failure is never served to a later request);
- started without a result, non-idempotent → ``outcome_unknown`` (not retryable): the worker
  died while running it, so whether it took effect is unknown; idempotent → it runs again.

A handle that arrives while a journaled call runs does not start a new epoch (``handle``), so
it never covers that call. The journal keeps what it wrote until a handle covers it (at most
``MAX_DEFERRED`` entries): when its lapsed lease is acquired again and the store lost them (a
Redis restarted empty), ``rejoin`` writes them again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from livebridge.calls import outcomes, payloads
from livebridge.calls.call import Call, Outcome
from livebridge.calls.observers import Observer, StoreOperation, emit
from livebridge.calls.repeats import classify
from livebridge.errors import LeaseLostError, StoreError
from livebridge.store.base import (
    Entry,
    HandleRecord,
    Lease,
    Snapshot,
    Store,
    key_digest,
    request_digest,
)

if TYPE_CHECKING:
    from livebridge.calls.tools import Tool

log = logging.getLogger("livebridge.store")

#: Deferred writes waiting at most; past it the oldest is dropped (logged, counted ``dropped``).
MAX_DEFERRED = 4096
#: Entries written in one round trip by the background writer.
MAX_BATCH = 256


def journaled(tool: Tool) -> str | None:
    """``before`` (started, then settled), ``after`` (settled only) or None for ``tool``; an
    irreversible tool is journaled as a non-idempotent one is, whatever else it says."""
    if tool.irreversible or not (tool.idempotent or tool.idempotency_key is not None):
        return "before"
    return "after" if tool.idempotency_key is not None else None


class Journal:
    """One conversation's journal for one owner (a session): candidates, tickets, writes."""

    def __init__(
        self,
        store: Store,
        conversation: str,
        owner: str,
        observers: Sequence[Observer] = (),
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.conversation = conversation
        self.owner = owner
        self.lease = Lease(owner, 0)  # the lease writes are fenced with (set on acquisition)
        self.seq = 0  # the newest handle's number (this owner's, or the one it resumed)
        self.lost = anyio.Event()  # set when a write found the lease lost for good
        self._observers = tuple(observers)
        self._wall = wall
        self._by_id: dict[str, Entry] = {}
        self._by_key: dict[str, Entry] = {}
        self._by_request: dict[str, Entry] = {}
        self._matched: dict[str, Entry] = {}  # candidates that answered a call
        self._deferred: OrderedDict[str, Entry] = OrderedDict()
        self._handle: HandleRecord | None = None  # waiting to be written
        self._newest: HandleRecord | None = None  # the newest handle, written or not
        self._running: set[str] = set()  # calls journaled started and not yet settled
        self._kept: OrderedDict[str, Entry] = OrderedDict()  # written, no handle covers them
        self._known: OrderedDict[str, tuple[int, bool]] = OrderedDict()  # id → (epoch, settled)
        self._wake = asyncio.Event()
        # One deferred batch in flight, so handles land in order; uncontended, it never yields.
        self._writing = anyio.Lock(fast_acquire=True)

    # -- takeover ----------------------------------------------------------------------------

    def restore(self, snapshot: Snapshot) -> int:
        """Adopt a stored conversation; returns how many calls were left started by a worker
        that is gone (no result recorded)."""
        self.seq = snapshot.handle.seq if snapshot.handle is not None else 0
        self._newest = snapshot.handle
        interrupted = 0
        for entry in snapshot.entries:
            if entry.epoch < self.seq:  # the resumed conversation knows this call and its answer
                self._remember(entry.call_id, entry.epoch, True)
                continue
            # Kept in the store until a call matches it: a later owner may still need it.
            self._remember(entry.call_id, entry.epoch, False)
            interrupted += entry.state == "started"
            self._by_id[entry.call_id] = entry
            if entry.key is not None:
                self._by_key[entry.key] = entry
            self._by_request[entry.request] = entry
        return interrupted

    def rejoin(self, lease: Lease, snapshot: Snapshot) -> int:
        """The lease was acquired again (``since`` the lost one: nobody else held it meanwhile),
        ``snapshot`` read after: queue again what the store no longer has (it restarted empty,
        or expired them). Returns how many entries are rewritten."""
        self.lease = lease
        stored = {entry.call_id: entry for entry in snapshot.entries}
        missing = [
            e for e in (*self._kept.values(), *self._by_id.values()) if e != stored.get(e.call_id)
        ]
        for entry in missing:
            if entry.call_id not in self._deferred:
                self.defer(entry)
        newest = self._newest
        if newest is not None and snapshot.handle != newest and self._handle is None:
            self._handle = newest
            self._wake.set()
        return len(missing)

    @property
    def candidates(self) -> int:
        """Entries of a previous owner not yet matched by a call."""
        return len(self._by_id)

    # -- the dispatcher's hook ---------------------------------------------------------------

    def admit(
        self, call: Call, tool: Tool, request: bytes, key: Hashable | None
    ) -> Outcome | _Ticket | None:
        mode = journaled(tool)
        if mode is None and not self._by_id:
            return None
        digest = request_digest(tool.name, request)
        key_id = key_digest(tool.name, key) if key is not None else None
        if self._by_id:
            answer = self._recall(call, tool, digest, key_id, mode)
            if answer is not None:
                return answer
        if mode is None:
            return None
        return _Ticket(self, call, tool.name, digest, key_id, mode == "before", self.seq)

    def _recall(
        self, call: Call, tool: Tool, digest: str, key_id: str | None, mode: str | None
    ) -> Outcome | None:
        entry = self._by_id.get(call.id)
        if entry is None and key_id is not None:
            entry = self._by_key.get(key_id)
        if entry is None:
            entry = self._by_request.get(digest)
        if entry is None or entry.name != tool.name:
            return None
        # Each repeat gets the same answer until a new handle shows the model has seen it.
        self._matched[entry.call_id] = entry
        self._remember(entry.call_id, entry.epoch, True)  # forgotten with the next handle
        if entry.state == "settled" and entry.kind is not None and entry.response is not None:
            if classify(entry.kind, seen=False) == "new":
                return None  # a failure is never served: the request runs again
            kind = "duplicate" if entry.call_id != call.id else entry.kind
            return Outcome(
                call.id,
                tool.name,
                kind,
                entry.response,
                result_bytes=payloads.encoded_size(entry.response),
                duplicate_of=entry.call_id,
                scheduling=tool.scheduling,
                dedup="journal",
            )
        if mode == "before":
            return outcomes.outcome_unknown(call, entry.call_id)
        return None  # idempotent: it runs again

    def _consume(self, entry: Entry) -> None:
        self._by_id.pop(entry.call_id, None)
        if entry.key is not None and self._by_key.get(entry.key) is entry:
            del self._by_key[entry.key]
        if self._by_request.get(entry.request) is entry:
            del self._by_request[entry.request]

    # -- writes ------------------------------------------------------------------------------

    async def begin(self, entry: Entry) -> None:
        """Journal ``entry`` before its handler runs, together with whatever waits to be
        written (one round trip); raises ``StoreError``."""
        self._running.add(entry.call_id)  # from now on no handle may cover it
        try:
            if self.dirty:
                await self._write("begin", entry)
            else:
                await self.timed("begin", self.store.begin(self.conversation, self.lease, entry))
        except BaseException:
            self._running.discard(entry.call_id)
            raise
        self._remember(entry.call_id, entry.epoch, False)
        self._keep(entry)

    def defer(self, entry: Entry) -> None:
        """Queue an entry for the background writer (the newest version of a call wins)."""
        if entry.state == "settled":
            self._running.discard(entry.call_id)
        deferred = self._deferred
        deferred.pop(entry.call_id, None)
        deferred[entry.call_id] = entry
        if len(deferred) > MAX_DEFERRED:
            dropped, _ = deferred.popitem(last=False)
            log.warning("journal write of call %s dropped: %d are waiting", dropped, MAX_DEFERRED)
            emit(self._observers, StoreOperation("write", 0.0, "dropped"))
        self._wake.set()

    def handle(self, handle: str) -> None:
        """A new resumable handle, stored by the background writer. The next epoch begins
        only while no journaled call is running: a handle that arrives while one is keeps the
        epoch, so a takeover resuming it still finds that call ``started``."""
        if not self._running:
            self.seq += 1
        self._newest = self._handle = HandleRecord(handle, self.seq, self._wall(), self.owner)
        for entry in self._matched.values():
            self._consume(entry)
        self._matched.clear()
        self._wake.set()

    @property
    def dirty(self) -> bool:
        return bool(self._deferred) or self._handle is not None

    async def wait_dirty(self) -> None:
        while not self.dirty:
            self._wake = asyncio.Event()
            await self._wake.wait()

    async def flush(self) -> None:
        """Write what is deferred, in batches; raises ``StoreError`` (the rest stays queued)."""
        while self.dirty:
            await self._write("write")

    async def _write(self, operation: str, extra: Entry | None = None) -> None:
        """One batch of deferred writes (and ``extra``), put back in the queue if it fails."""
        async with self._writing:
            await self._write_batch(operation, extra)

    async def _write_batch(self, operation: str, extra: Entry | None) -> None:
        handle, self._handle = self._handle, None
        batch: list[Entry] = []
        while self._deferred and len(batch) < MAX_BATCH:
            batch.append(self._deferred.popitem(last=False)[1])
        for entry in batch:
            self._remember(entry.call_id, entry.epoch, entry.state == "settled")
        forget: list[str] = []
        if handle is not None:  # settled calls of earlier epochs: the handle covers them
            known = self._known.items()
            forget = [i for i, (epoch, done) in known if done and epoch < handle.seq]
            for call_id in forget:
                del self._known[call_id]
            gone = set(forget)
            batch = [entry for entry in batch if entry.call_id not in gone]
        entries = batch if extra is None else [*batch, extra]
        try:
            await self.timed(
                operation,
                self.store.write(
                    self.conversation, self.lease, handle=handle, entries=entries, forget=forget
                ),
            )
        except StoreError:
            if handle is not None and self._handle is None:
                self._handle = handle
            for entry in reversed(batch):  # back at the front, unless a newer one is queued
                if entry.call_id not in self._deferred:
                    self._deferred[entry.call_id] = entry
                    self._deferred.move_to_end(entry.call_id, last=False)
            for call_id in forget:  # still to forget with the next handle
                self._remember(call_id, -1, True)
            raise
        for call_id in forget:
            self._kept.pop(call_id, None)
        for entry in entries:
            self._keep(entry)

    async def timed(self, operation: str, work: Any) -> Any:
        """Await a store operation, reporting its duration and any error to the observers."""
        started = time.perf_counter()
        error: str | None = None
        try:
            return await work
        except LeaseLostError:
            error = "lease_lost"
            self.lost.set()
            raise
        except StoreError:
            error = "unavailable"
            raise
        finally:
            if self._observers:
                seconds = time.perf_counter() - started
                emit(self._observers, StoreOperation(operation, seconds, error))

    def _keep(self, entry: Entry) -> None:
        """What was written, until a handle covers it: written again if the store loses it."""
        kept = self._kept
        kept.pop(entry.call_id, None)
        kept[entry.call_id] = entry
        if len(kept) > MAX_DEFERRED:
            kept.popitem(last=False)

    def _remember(self, call_id: str, epoch: int, settled: bool) -> None:
        known = self._known
        known[call_id] = (epoch, settled)
        if len(known) > MAX_DEFERRED:
            known.popitem(last=False)


class _Ticket:
    """One journaled call: ``begin`` before its handler, ``settled`` once answered."""

    __slots__ = ("_before", "_call", "_epoch", "_journal", "_key", "_name", "_request", "_started")

    def __init__(
        self,
        journal: Journal,
        call: Call,
        name: str,
        request: str,
        key: str | None,
        before: bool,
        epoch: int,
    ) -> None:
        self._journal = journal
        self._call = call
        self._name = name
        self._request = request
        self._key = key
        self._before = before
        self._epoch = epoch
        self._started = 0.0

    def _entry(self, **fields: Any) -> Entry:
        journal = self._journal
        return Entry(
            self._call.id,
            self._name,
            self._request,
            epoch=self._epoch,
            owner=journal.owner,
            started_at=self._started or journal._wall(),
            key=self._key,
            **fields,
        )

    async def begin(self) -> None:
        if self._before:  # the epoch it starts in: a handle since admission covers it not
            journal = self._journal
            self._started, self._epoch = journal._wall(), journal.seq
            await journal.begin(self._entry(state="started"))

    def settled(self, outcome: Outcome) -> None:
        entry = self._entry(
            state="settled",
            settled_at=self._journal._wall(),
            kind=outcome.kind,
            response=outcome.response,
        )
        self._journal.defer(entry)
