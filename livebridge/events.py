"""Typed events a ``LiveSession`` delivers to the app through ``session.events()``."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import anyio

from livebridge.calls import Behavior, OutcomeKind


@dataclass(frozen=True, slots=True)
class AudioOut:
    """A chunk of the model's speech: 16-bit little-endian PCM, mono."""

    data: bytes
    rate: int = 24_000


@dataclass(frozen=True, slots=True)
class TextOut:
    """Text the model produced (in TEXT modality sessions)."""

    text: str


@dataclass(frozen=True, slots=True)
class InputTranscript:
    """What the model heard the user say."""

    text: str
    finished: bool = False


@dataclass(frozen=True, slots=True)
class OutputTranscript:
    """What the model said, as text."""

    text: str
    finished: bool = False


@dataclass(frozen=True, slots=True)
class TurnComplete:
    """The model finished its turn; ``usage`` is the ``usageMetadata`` sent with it, if any."""

    usage: Mapping[str, Any] | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Interrupted:
    """The user barged in: stop playing the model's audio now."""


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """The model asked for a call and livebridge admitted it."""

    call_id: str
    name: str
    args: Any
    behavior: Behavior


@dataclass(frozen=True, slots=True)
class ToolCallSettled:
    """A call reached its fate: answered (with its outcome), cancelled or orphaned.

    ``latency`` is the handler's run time; ``turnaround`` is from ``toolCall`` received to the
    answer sent (``None`` when nothing was sent: cancelled or orphaned calls).
    """

    call_id: str
    name: str
    outcome: OutcomeKind
    latency: float
    turnaround: float | None = None
    error: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class GoAway:
    """The server will close this connection in ``time_left`` seconds; livebridge switches over."""

    time_left: float


@dataclass(frozen=True, slots=True)
class Resumed:
    """The session continues on a new connection; ``orphaned`` lists calls it could not carry."""

    reason: str
    orphaned: Sequence[str] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class Closed:
    """Terminal: the session ended. ``error`` says why when it was not a normal close."""

    reason: str
    error: Exception | None = None


@dataclass(frozen=True, slots=True)
class EventsDropped:
    """The app read events too slowly and ``count`` droppable events were discarded."""

    count: int


SessionEvent: TypeAlias = (
    AudioOut
    | TextOut
    | InputTranscript
    | OutputTranscript
    | TurnComplete
    | Interrupted
    | ToolCallStarted
    | ToolCallSettled
    | GoAway
    | Resumed
    | Closed
    | EventsDropped
)

#: Events that may be discarded when the app falls behind; everything else is always delivered.
DROPPABLE: tuple[type, ...] = (AudioOut, TextOut, InputTranscript, OutputTranscript)


class EventBuffer:
    """A bounded buffer between the session actor and the app.

    Overflow policy: when ``capacity`` events are waiting, putting another discards the OLDEST
    droppable event (audio, text, transcripts: stale media is worth least). Control events (tool
    calls, turns, go-away, resumed, closed) are never discarded, so the buffer can exceed its
    capacity only by those. The app learns of discards through one ``EventsDropped`` event placed
    before the next event it reads. After ``close()`` readers drain what is left, then stop.
    """

    def __init__(self, capacity: int = 1024) -> None:
        if capacity < 1:
            raise ValueError(f"event buffer capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.dropped = 0
        self._items: deque[SessionEvent] = deque()
        self._pending_drops = 0
        self._closed = False
        self._new_event: Callable[[], anyio.Event] = type(anyio.Event())  # no backend lookups
        self._wakeup: anyio.Event | None = None  # set while a reader waits

    def put(self, event: SessionEvent) -> None:
        """Queue ``event`` without blocking, applying the overflow policy."""
        full = len(self._items) >= self.capacity
        if full and not self._drop_oldest_droppable() and isinstance(event, DROPPABLE):
            self._count_drop()
            return
        self._items.append(event)
        if self._wakeup is not None:
            self._wakeup.set()

    def close(self) -> None:
        """No more events will come; readers finish after the last one."""
        self._closed = True
        if self._wakeup is not None:
            self._wakeup.set()

    async def get(self) -> SessionEvent | None:
        """The next event, waiting for one; ``None`` once closed and drained."""
        while True:
            if self._pending_drops:
                count, self._pending_drops = self._pending_drops, 0
                return EventsDropped(count)
            if self._items:
                return self._items.popleft()
            if self._closed:
                return None
            wakeup = self._wakeup
            if wakeup is None:
                wakeup = self._wakeup = self._new_event()
            try:
                await wakeup.wait()
            finally:
                if self._wakeup is wakeup:
                    self._wakeup = None

    def __len__(self) -> int:
        return len(self._items)

    def _drop_oldest_droppable(self) -> bool:
        for index, queued in enumerate(self._items):
            if isinstance(queued, DROPPABLE):
                del self._items[index]
                self._count_drop()
                return True
        return False

    def _count_drop(self) -> None:
        self.dropped += 1
        self._pending_drops += 1
