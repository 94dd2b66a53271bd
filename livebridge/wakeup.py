"""A wake-up flag for the tasks of one session actor."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import anyio.lowlevel

__all__ = ["Wakeup"]


class Wakeup:
    """A wake-up flag for the actor's tasks: ``set()`` any number of times; ``wait()`` returns
    once it is set and clears it. Every task waiting when it is set wakes up.

    Built for the hot path: one event object per wake-up, of the running backend's own class
    (``anyio.Event()`` looks the backend up on every construction).
    """

    __slots__ = ("_event", "_make")

    def __init__(self) -> None:
        self._make: Callable[[], anyio.Event] | None = None
        self._event: anyio.Event | None = None

    def set(self) -> None:
        if self._event is None:
            self._event = self._new()
        self._event.set()

    async def wait(self) -> None:
        event = self._event
        if event is None:
            event = self._event = self._new()
        if event.is_set():
            self._event = None
            await anyio.lowlevel.checkpoint()
            return
        await event.wait()
        if self._event is event:  # the first waiter to wake consumes it
            self._event = None

    def _new(self) -> anyio.Event:
        if self._make is None:
            self._make = type(anyio.Event())
        return self._make()
