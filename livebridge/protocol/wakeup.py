"""Waking the tasks of one session actor: a list of waiting tasks, and a wake-up flag on it."""

from __future__ import annotations

import asyncio

import anyio.lowlevel


class Waiters:
    """Tasks waiting for news: ``wait()`` until the next ``wake()``, which wakes them all.

    Built for the hot path and for idle sessions: one future per waiting task and nothing else
    (an ``asyncio.Event`` keeps a deque of its own, and is dearer made afresh per wait:
    benchmarks/PROFILE.md). Each waiter awaits its own future, so cancelling one waiter never
    wakes or cancels the others.
    """

    __slots__ = ("futures",)

    def __init__(self) -> None:
        #: One per waiting task; None while none waits (an attribute, not ``__bool__``: hot
        #: paths test it before they call ``wake()``; benchmarks/PROFILE.md, Hot core).
        self.futures: list[asyncio.Future[None]] | None = None

    def wake(self) -> None:
        futures, self.futures = self.futures, None
        for future in futures or ():
            if not future.done():
                future.set_result(None)

    async def wait(self) -> None:
        future = asyncio.get_running_loop().create_future()
        futures = self.futures
        if futures is None:
            self.futures = [future]
        else:
            futures.append(future)
        try:
            await future
        except BaseException:
            futures = self.futures
            if futures is not None and future in futures:
                futures.remove(future)
            raise


class Wakeup:
    """A wake-up flag for the actor's tasks: ``set()`` any number of times; ``wait()`` returns
    once it is set and clears it. Every task waiting when it is set wakes up (``Waiters``).
    """

    __slots__ = ("_epoch", "_set", "_waiters")

    def __init__(self) -> None:
        self._set = False
        self._epoch = 0  # sets so far: a waiter consumes only the set that woke it
        self._waiters = Waiters()

    def set(self) -> None:
        if self._set:
            return
        self._set = True
        self._epoch += 1
        if self._waiters.futures is not None:
            self._waiters.wake()

    def clear(self) -> None:
        """Forget a set nobody consumed yet. Safe because every waiter checks its own condition
        before it waits; tasks already woken stay woken."""
        self._set = False

    async def wait(self) -> None:
        if self._set:
            self._set = False
            await anyio.lowlevel.checkpoint()
            return
        epoch = self._epoch
        await self._waiters.wait()
        if self._epoch == epoch + 1:  # the first waiter to wake consumes the set that woke it
            self._set = False
