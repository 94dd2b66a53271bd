"""A one-shot flag shared by a scenario and the test that drives the client.

The emulator serves on a thread of its own, with its own event loop: a scenario runs there, the
client and the test on theirs. An ``asyncio.Event`` (or ``anyio.Event``) set on one loop does not
wake a waiter on the other; the waiter sees it only when its loop happens to wake for something
else, seconds later (a keepalive ping). ``Signal`` wakes the waiter's own loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading


class Signal:
    """Set once from any thread; awaited on any event loop, by any number of waiters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()

    def set(self) -> None:
        """Set the flag and wake every waiter on its own loop; setting it again does nothing."""
        with self._lock:
            if self._set:
                return
            self._set = True
            waiters = list(self._waiters)
        for loop, event in waiters:
            wake(loop, event)

    def is_set(self) -> bool:
        return self._set

    async def wait(self) -> None:
        """Return once the flag is set (at once if it already is)."""
        event = asyncio.Event()
        waiter = (asyncio.get_running_loop(), event)
        with self._lock:
            if self._set:
                return
            self._waiters.add(waiter)
        try:
            await event.wait()
        finally:
            with self._lock:
                self._waiters.discard(waiter)


def wake(loop: asyncio.AbstractEventLoop, event: asyncio.Event) -> None:
    """Set ``event`` on its own ``loop`` from any thread (nothing, once that loop has closed:
    nobody waits there any more)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(event.set)
