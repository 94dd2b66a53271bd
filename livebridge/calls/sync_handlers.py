"""Sync handlers in worker threads, which cannot be interrupted, holding their slots throughout.

A timed-out or cancelled sync handler is answered at once, but its thread runs on: the
concurrency slots it holds (the session's ``max_parallel``, the tool's ``max_concurrency``, a
shared limiter) are given back only when the thread really returns, so a limit is never
overrun by threads the caller stopped waiting for.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol

import anyio

_Slot = Literal["waiting", "running", "done", "abandoned", "closed"]


class SlotLimiter(Protocol):
    """What a concurrency limit must offer: ``anyio.CapacityLimiter``, or a shared one such
    as ``livebridge.store.RedisLimiter``. ``acquire_on_behalf_of_nowait`` raises
    ``anyio.WouldBlock`` when a slot is not free at once (or cannot be known at once)."""

    def acquire_on_behalf_of_nowait(self, borrower: object) -> None: ...

    async def acquire_on_behalf_of(self, borrower: object) -> None: ...

    def release_on_behalf_of(self, borrower: object) -> None: ...


async def acquire_each(
    limiters: Sequence[SlotLimiter],
    borrower: object,
    acquired: list[SlotLimiter],
    before_wait: Callable[[], None],
) -> None:
    """Take each limiter in turn, calling ``before_wait`` before waiting for one that is busy;
    each joins ``acquired`` as soon as it is held (to be given back if this is cancelled)."""
    for limiter in limiters:
        try:
            limiter.acquire_on_behalf_of_nowait(borrower)
        except anyio.WouldBlock:
            before_wait()
            await limiter.acquire_on_behalf_of(borrower)
        acquired.append(limiter)


class LocalSlots:
    """A ``SlotLimiter`` of one event loop: a count of free slots, then a first-come queue.

    The dispatcher's own ``max_parallel``: what ``anyio.CapacityLimiter`` does for that one
    use, with less work per call (benchmarks/PROFILE.md): no set of borrowers, no check that
    one borrower does not take two slots; every borrower here is one call, which takes one, once.
    ``free`` and ``waiting`` are public so that the dispatcher takes a free slot, and gives
    one back that nobody waits for, inline: once each per call.
    """

    __slots__ = ("free", "waiting")

    def __init__(self, total: int) -> None:
        self.free = total
        # A slot given back goes straight to the first waiter: never free while one waits.
        self.waiting: OrderedDict[object, asyncio.Event] = OrderedDict()

    def acquire_on_behalf_of_nowait(self, borrower: object) -> None:
        if not self.free:
            raise anyio.WouldBlock
        self.free -= 1

    async def acquire_on_behalf_of(self, borrower: object) -> None:
        if self.free:
            self.free -= 1
            return
        handed = self.waiting[borrower] = asyncio.Event()
        try:
            await handed.wait()
        except BaseException:
            if self.waiting.pop(borrower, None) is None:  # handed a slot already: pass it on
                self.release_on_behalf_of(borrower)
            raise

    def release_on_behalf_of(self, borrower: object) -> None:
        if self.waiting:
            self.waiting.popitem(last=False)[1].set()
        else:
            self.free += 1


class ThreadSlots:
    """The concurrency slots of a sync handler, held until its thread really returns.

    If the call is answered first (timeout, cancellation), the thread gives the slots back
    from its last line through the event loop; a thread that never started skips the body.
    """

    __slots__ = ("_acquired", "_borrower", "_lock", "_loop", "_state")

    def __init__(self, acquired: Sequence[SlotLimiter], borrower: object) -> None:
        self._acquired = acquired
        self._borrower = borrower
        self._lock = threading.Lock()
        self._loop = asyncio.get_running_loop()
        self._state: _Slot = "waiting"

    async def run(self, body: Callable[[], Any], threads: anyio.CapacityLimiter) -> Any:
        """Run ``body`` in a worker thread of ``threads``; cancelled, the caller stops waiting
        at once while the thread runs on, holding the slots until it returns."""
        return await anyio.to_thread.run_sync(
            self.wrap(body), abandon_on_cancel=True, limiter=threads
        )

    def wrap(self, body: Callable[[], Any]) -> Callable[[], Any]:
        def in_thread() -> Any:
            with self._lock:
                if self._state == "closed":
                    return None  # the call was answered before this thread started
                self._state = "running"
            try:
                return body()
            finally:
                if self._finish_in_thread():
                    with contextlib.suppress(RuntimeError):  # the loop is gone: nothing to guard
                        self._loop.call_soon_threadsafe(self._release)

        return in_thread

    def _finish_in_thread(self) -> bool:
        """The body returned; True if the call was already answered (the slots are ours)."""
        with self._lock:
            abandoned = self._state == "abandoned"
            self._state = "done"
            return abandoned

    def leave(self) -> bool:
        """The call is settled; True if the caller releases the slots now (no thread runs)."""
        with self._lock:
            if self._state == "running":
                self._state = "abandoned"
                return False
            self._state = "closed"
            return True

    def _release(self) -> None:
        for limiter in reversed(self._acquired):
            limiter.release_on_behalf_of(self._borrower)
