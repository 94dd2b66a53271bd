"""A wake-up flag for the tasks of one session actor."""

from __future__ import annotations

import asyncio

__all__ = ["Wakeup"]


class Wakeup:
    """A wake-up flag for the actor's tasks: ``set()`` any number of times; ``wait()`` returns
    once it is set and clears it. Every task waiting when it is set wakes up.

    Built for the hot path, where it is set several times per tool call: setting it again
    before anyone woke costs one attribute test, and a wake-up costs one ``asyncio.Event``
    (the session actor runs on asyncio; anyio cancel scopes cancel its waits as any other).
    """

    __slots__ = ("_event", "_is_set")

    def __init__(self) -> None:
        self._event: asyncio.Event | None = None
        self._is_set = False  # the current event is set and nobody consumed it yet

    def set(self) -> None:
        if self._is_set:
            return
        self._is_set = True
        if self._event is None:
            self._event = asyncio.Event()
        self._event.set()

    def clear(self) -> None:
        """Forget a set that nobody consumed yet. Safe because every waiter checks its own
        condition before it waits; tasks already woken stay woken."""
        if self._is_set:
            self._event, self._is_set = None, False

    async def wait(self) -> None:
        event = self._event
        if self._is_set:
            self._event, self._is_set = None, False
            await asyncio.sleep(0)  # a checkpoint, as an await that does not block must be
            return
        if event is None:
            event = self._event = asyncio.Event()
        await event.wait()
        if self._event is event:  # the first waiter to wake consumes it
            self._event, self._is_set = None, False
