"""``StoreConnector``: a connector wrapper that makes a session one owner of a stored conversation.

``LiveSession.connect(..., store=store, conversation="user-42")`` wraps its connector in one.
Its ``run`` task lives as long as the session:

1. it takes the conversation's lease (``ConversationBusyError`` from ``connect`` while another
   worker's lease is live; it lasts the store's ``lease_ttl`` seconds without a heartbeat);
2. it loads the stored handle and journal (``Journal.restore``): the first connection resumes
   the stored handle, and a stale one (the service no longer knows it) is dropped for a fresh
   session, logged;
3. it renews the lease every ``lease_ttl / 3`` seconds (the renewal keeps the handle and
   journal too) and writes the deferred journal entries and each new handle in the
   background. A store that does not answer is retried, while every call that needs the store
   is refused ``store_unavailable``. A lease that lapsed (the store was paused, unreachable or
   restarted) is never renewed: it is acquired again with a new epoch only if nobody acquired
   it meanwhile, and what the store lost is written again (``Journal.rejoin``); else, or when
   any write finds the lease taken, the session ends with ``LeaseLostError``;
4. when the session ends, it writes what is left (within ``lease_ttl / 3`` seconds) and
   releases the lease, so the next worker can take over at once.

The session hands over each new resumable handle as its protocol takes it (``new_handle``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
from anyio.abc import TaskStatus

from livebridge.calls.observers import LeaseChanged, LeaseEvent, Observer, emit
from livebridge.calls.tools import ToolRegistry
from livebridge.errors import (
    ConversationBusyError,
    LeaseLostError,
    SessionNotFoundError,
    StoreError,
    TransportClosed,
    UsageError,
)
from livebridge.protocol import resume
from livebridge.protocol.actions import ProtocolOptions
from livebridge.protocol.base import Connector, LiveProtocol
from livebridge.protocol.transport import Transport
from livebridge.store.base import Store, new_owner
from livebridge.store.journal import Journal

log = logging.getLogger("livebridge.store")

#: Seconds between writes retried while the store is unavailable (doubling up to the cap).
RETRY_FIRST, RETRY_CAP = 0.05, 1.0


class StoreConnector:
    """Wraps ``inner`` so its connections belong to ``conversation`` in ``store``."""

    def __init__(
        self,
        inner: Connector,
        store: Store,
        conversation: str,
        *,
        owner: str | None = None,
        observers: Sequence[Observer] = (),
    ) -> None:
        if not isinstance(conversation, str) or not conversation:
            raise UsageError("conversation must be a non-empty string, e.g. the user's id")
        self._inner = inner
        self.store = store
        self.conversation = conversation
        self.lease_ttl = store.lease_ttl
        self.owner = owner or new_owner()
        self._observers = tuple(observers)
        self.journal = Journal(store, conversation, self.owner, observers)
        self._resume: str | None = None  # the stored handle, until the session has its own

    @classmethod
    def attach(
        cls,
        inner: Connector,
        store: Store | None,
        conversation: str | None,
        observers: Sequence[Observer] = (),
    ) -> StoreConnector | None:
        """``inner`` wrapped for ``conversation`` (None when neither is given); without a
        ``store``, the process-wide ``MemoryStore``."""
        if conversation is None and store is None:
            return None
        if conversation is None:
            raise UsageError("a store needs a conversation id: connect(..., conversation=...)")
        if store is None:
            from livebridge.store import default_store

            store = default_store()
        return cls(inner, store, conversation, observers=observers)

    def protocol(
        self, tools: ToolRegistry, options: ProtocolOptions, *, observed: bool
    ) -> LiveProtocol:
        return self._inner.protocol(tools, options, observed=observed)

    @asynccontextmanager
    async def open(self, handle: str | None) -> AsyncIterator[Transport]:
        use = handle or self._resume
        async with AsyncExitStack() as stack:
            try:
                transport = await stack.enter_async_context(self._inner.open(use))
            except TransportClosed as exc:
                if use is None or use != self._resume or not _stale(exc):
                    raise
                log.warning(
                    "conversation %r: the stored handle is no longer known to the service;"
                    " starting a fresh session",
                    self.conversation,
                )
                self._resume = None
                transport = await stack.enter_async_context(self._inner.open(None))
            yield transport

    def new_handle(self, handle: str) -> None:
        """The session's protocol took a new resumable handle: resume with it, and store it."""
        self._resume = handle
        self.journal.handle(handle)

    # -- the session-long task ---------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Hold the conversation for the session (see the module docstring)."""
        journal, store = self.journal, self.store
        try:
            journal.lease = await journal.timed(
                "acquire", store.acquire(self.conversation, self.owner, self.lease_ttl)
            )
        except ConversationBusyError:
            self._lease("busy")
            raise
        try:
            snapshot = await journal.timed("load", store.load(self.conversation))
            interrupted = journal.restore(snapshot)
            if snapshot.handle is not None:
                self._resume = snapshot.handle.handle
            resumed = snapshot.handle is not None or bool(snapshot.entries)
            self._lease("resumed" if resumed else "acquired", interrupted)
            if interrupted:
                log.warning(
                    "conversation %r taken over: %d call(s) were started by a worker that died"
                    " before recording a result; re-issued, a non-idempotent one is answered"
                    " outcome_unknown",
                    self.conversation,
                    interrupted,
                )
            task_status.started()
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._heartbeat)
                tg.start_soon(self._fenced_out, tg.cancel_scope)
                await self._write()
            raise self._lost()  # only ``_fenced_out`` ends the task group
        finally:
            with anyio.CancelScope(shield=True):
                await self._leave()

    async def _heartbeat(self) -> None:
        journal, store = self.journal, self.store
        while True:
            await anyio.sleep(self.lease_ttl / 3)
            try:
                held = await journal.timed(
                    "renew", store.renew(self.conversation, journal.lease, self.lease_ttl)
                )
                if not held:  # lapsed or taken: only a new epoch may act again
                    again = store.acquire(
                        self.conversation, self.owner, self.lease_ttl, since=journal.lease
                    )
                    lease = await journal.timed("acquire", again)
                    snapshot = await journal.timed("load", store.load(self.conversation))
                    rewritten = journal.rejoin(lease, snapshot)
                    log.warning(
                        "conversation %r: the lease had lapsed and nobody took it; acquired"
                        " again (epoch %d), %d journal entries to write again",
                        self.conversation,
                        lease.epoch,
                        rewritten,
                    )
                    self._lease("acquired")
            except LeaseLostError:
                return  # ``timed`` told ``_fenced_out``, which ends the task group
            except StoreError as exc:
                log.warning("conversation %r: lease not renewed: %s", self.conversation, exc)

    async def _fenced_out(self, scope: anyio.CancelScope) -> None:
        """Any store operation (a renewal, a call's ``started`` entry, a deferred write)
        found the lease lost for good: the session ends at once."""
        await self.journal.lost.wait()
        scope.cancel()

    def _lost(self) -> LeaseLostError:
        self._lease("lost")
        return LeaseLostError(
            f"conversation {self.conversation!r} was taken over by another worker while"
            " this one could not renew its lease; this session ends here"
        )

    async def _write(self) -> None:
        """The background writer: deferred journal entries and handles, retried on failure."""
        delay = RETRY_FIRST
        while True:
            await self.journal.wait_dirty()
            try:
                await self.journal.flush()
            except LeaseLostError:
                return  # as in ``_heartbeat``
            except StoreError as exc:
                log.warning("conversation %r: journal write deferred: %s", self.conversation, exc)
                await anyio.sleep(delay)
                delay = min(delay * 2, RETRY_CAP)
                continue
            delay = RETRY_FIRST

    async def _leave(self) -> None:
        """Write what is left and release the lease, bounded in time (nothing once the lease
        is lost: every write would be refused)."""
        if self.journal.lost.is_set():
            return
        with anyio.move_on_after(self.lease_ttl / 3):
            try:
                await self.journal.flush()
            except StoreError as exc:
                log.warning("conversation %r: journal writes lost: %s", self.conversation, exc)
            try:
                release = self.store.release(self.conversation, self.journal.lease)
                await self.journal.timed("release", release)
                self._lease("released")
            except StoreError as exc:
                log.warning("conversation %r: lease not released: %s", self.conversation, exc)

    def _lease(self, event: LeaseEvent, interrupted: int = 0) -> None:
        if self._observers:
            emit(self._observers, LeaseChanged(event, interrupted))


def _stale(exc: TransportClosed) -> bool:
    """The service refused to resume: it no longer knows the handle."""
    decision = resume.classify_close(exc.code, exc.reason)
    return isinstance(decision.error, SessionNotFoundError)
