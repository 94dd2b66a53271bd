"""A wake-up flag for the tasks of one session actor."""

from __future__ import annotations

import asyncio

import anyio.lowlevel

__all__ = ["Wakeup"]


class Wakeup:
    """A wake-up flag for the actor's tasks: ``set()`` any number of times; ``wait()`` returns
    once it is set and clears it. Every task waiting when it is set wakes up.

    Built for the hot path and for idle sessions: one future per waiting task and nothing else
    (an ``anyio.Event`` carries an ``asyncio.Event`` whose waiter deque preallocates ~0.5 KB,
    and a session's writer waits on its flag for as long as the session is idle). Each waiter
    awaits its own future, so cancelling one waiter never wakes or cancels the others.
    """

    __slots__ = ("_epoch", "_set", "_waiters")

    def __init__(self) -> None:
        self._set = False
        self._epoch = 0  # sets so far: a waiter consumes only the set that woke it
        self._waiters: list[asyncio.Future[None]] | None = None

    def set(self) -> None:
        if self._set:
            return
        self._set = True
        self._epoch += 1
        waiters = self._waiters
        if waiters is not None:
            self._waiters = None
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def clear(self) -> None:
        """Forget a set nobody consumed yet. Safe because every waiter checks its own condition
        before it waits; tasks already woken stay woken."""
        self._set = False

    async def wait(self) -> None:
        if self._set:
            self._set = False
            await anyio.lowlevel.checkpoint()
            return
        waiter = asyncio.get_running_loop().create_future()
        waiters = self._waiters
        if waiters is None:
            self._waiters = [waiter]
        else:
            waiters.append(waiter)
        epoch = self._epoch
        try:
            await waiter
        except BaseException:
            waiters = self._waiters
            if waiters is not None and waiter in waiters:
                waiters.remove(waiter)
            raise
        if self._epoch == epoch + 1:  # the first waiter to wake consumes the set that woke it
            self._set = False
