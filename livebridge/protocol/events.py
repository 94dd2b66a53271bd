"""Typed events a ``LiveSession`` delivers to the app through ``session.events()``."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import msgspec

from livebridge.calls.call import Behavior
from livebridge.calls.endings import FateKind, OutcomeKind
from livebridge.calls.observers import Event, Reconnected, SessionClosed
from livebridge.protocol.wakeup import Waiters


@dataclass(frozen=True, slots=True)
class AudioOut:
    """A chunk of the model's speech: 16-bit little-endian PCM, mono; ``encoding="pcmu"``:
    G.711 μ-law at 8 kHz, a byte a sample (an OpenAI session configured for ``audio/pcmu``)."""

    data: bytes
    rate: int = 24_000
    encoding: Literal["pcm16", "pcmu"] = "pcm16"


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


class ToolCallStarted(msgspec.Struct, frozen=True, gc=False):
    """The model asked for a call and livebridge admitted it."""

    call_id: str
    name: str
    args: Any
    behavior: Behavior


class ToolCallSettled(msgspec.Struct, frozen=True, gc=False):
    """A call reached its fate: ``answered`` (``outcome`` says with what), ``cancelled`` or
    ``orphaned`` (``outcome`` is None: no answer was sent). ``livebridge.calls.endings`` says
    what each fate and outcome means.

    ``latency`` is the handler's run time; ``turnaround`` is from ``toolCall`` received to the
    answer sent (``None`` when nothing was sent: cancelled or orphaned calls). ``reason`` says
    why a call was cancelled or orphaned (the server cancelled it, the session ended, ...).
    """

    call_id: str
    name: str
    fate: FateKind
    outcome: OutcomeKind | None
    latency: float
    turnaround: float | None = None
    error: Mapping[str, Any] | None = None
    reason: str | None = None

    @property
    def ending(self) -> OutcomeKind | FateKind:
        """How a person reads its end: the outcome when answered, else the fate."""
        return self.fate if self.outcome is None else self.outcome


@dataclass(frozen=True, slots=True)
class GoAway:
    """The server will close this connection in ``time_left`` seconds; livebridge switches over."""

    time_left: float


@dataclass(frozen=True, slots=True)
class Resumed:
    """The session continues on a new connection; ``orphaned`` lists calls it could not carry.

    ``error`` says what ended the previous connection when it was not a planned switch-over
    (e.g. a ``FrameTooLargeError`` naming the size of the frame that was lost). ``fresh``: the
    vendor cannot resume (OpenAI Realtime), so the new connection starts an empty conversation:
    send again what the model must know.
    """

    reason: str
    orphaned: Sequence[str] = field(default_factory=tuple)
    error: Exception | None = None
    fresh: bool = False


@dataclass(frozen=True, slots=True)
class ErrorReported:
    """The service reported an error and the session goes on (OpenAI Realtime ``error``)."""

    error: Exception


@dataclass(frozen=True, slots=True)
class Closed:
    """Terminal: the session ended. ``error`` says why when it was not a normal close."""

    reason: str
    error: Exception | None = None


@dataclass(frozen=True, slots=True)
class EventsDropped:
    """The app read events too slowly and ``count`` events were discarded since the last one
    it read: ``media`` audio, text and transcripts, ``control`` other events, and ``settled``
    the ``ToolCallSettled`` events past ``settled_capacity``, counted by ``ending`` (the outcome
    of an answered call, else its fate). Observers and
    metrics saw every one of those fates."""

    count: int
    media: int = 0
    control: int = 0
    settled: Mapping[str, int] = field(default_factory=dict)


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
    | ErrorReported
    | Closed
    | EventsDropped
)

#: Events that may be discarded when the app falls behind: stale media is worth least.
DROPPABLE: tuple[type, ...] = (AudioOut, TextOut, InputTranscript, OutputTranscript)
#: Events that are never discarded: the end of the session. (A call's fate is discarded only
#: past ``settled_capacity``, and counted by its ``ending``.)
KEPT: tuple[type, ...] = (Closed,)

#: Exact types: a set look-up is cheaper than isinstance.
_MEDIA = frozenset(DROPPABLE)
_KEPT = frozenset(KEPT)


#: The queue of a kind no event has used yet: shared, always empty, never appended to.
_NONE: deque[Any] = deque(maxlen=0)


class EventBuffer:
    """A buffer between the session actor and the app: puts are O(1) and never block.

    Overflow policy, for an app that reads slowly or not at all:

    - media (audio, text, transcripts): when ``capacity`` events are waiting, putting another
      discards the OLDEST waiting media event (or the new one when none is waiting);
    - other events (turns, interruptions, calls started, go-away, resumed): at most
      ``control_capacity`` (default ``4 * capacity``) wait; beyond that the oldest is discarded;
    - a call's fate (``ToolCallSettled``): at most ``settled_capacity`` (default 4096) wait;
      beyond that the oldest is discarded and counted by its outcome (observers and metrics
      still see every fate: they do not read this buffer);
    - ``Closed`` is never discarded.

    The app learns of discards through one ``EventsDropped`` (how many of each kind, and the
    outcomes of the fates) placed before the next event it reads. After ``close()`` readers
    drain what is left, then stop.

    Layout: each kind (media, control, fates, kept) has a queue of its events, and ``_items``
    holds, in order, the queue each event went to: no object is made per event. The oldest
    waiting event of a kind is discarded from the front of its queue, so the first tags of that
    kind in ``_items`` are then stale: a count per kind skips them as they are read.
    """

    def __init__(
        self,
        capacity: int = 1024,
        control_capacity: int | None = None,
        settled_capacity: int = 4096,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"event buffer capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.control_capacity = 4 * capacity if control_capacity is None else control_capacity
        if self.control_capacity < 1:
            raise ValueError("control_capacity must be at least 1")
        if settled_capacity < 1:
            raise ValueError("settled_capacity must be at least 1")
        self.settled_capacity = settled_capacity
        self.dropped = 0
        # Each queue is made by its first event (``_NONE`` until then): an empty deque is
        # 760 bytes on 3.11, and most sessions never need some of them.
        self._items: deque[deque[SessionEvent]] = _NONE  # each event's queue, in order
        self._media: deque[SessionEvent] = _NONE  # waiting media, oldest first
        self._control: deque[SessionEvent] = _NONE  # waiting droppable control events
        self._settled: deque[SessionEvent] = _NONE  # waiting fates, oldest first
        self._kept: deque[SessionEvent] = _NONE  # events never discarded
        self._discarded = 0  # stale tags in _items: events discarded, not yet skipped
        self._skip_media = self._skip_control = self._skip_settled = 0  # the same, by kind
        self._pending_drops = 0
        self._pending_media = 0
        self._pending_control = 0
        self._pending_settled: dict[str, int] = {}
        self._closed = False
        self._readers = Waiters()  # readers waiting for an event

    def put(self, event: SessionEvent) -> None:
        """Queue ``event`` without blocking, applying the overflow policy."""
        kind = type(event)
        if len(self._items) - self._discarded >= self.capacity:
            if self._media:
                self._discard_media()
            elif kind in _MEDIA:
                self._count_drop(event)
                return
        if kind in _MEDIA:
            queue = self._media
            if queue is _NONE:
                queue = self._media = self._new_queue()
            self._items.append(queue)
            queue.append(event)
        elif kind is ToolCallSettled:
            queue = self._settled
            if queue is _NONE:
                queue = self._settled = self._new_queue()
            self._items.append(queue)
            queue.append(event)
            if len(queue) > self.settled_capacity:
                self._skip_settled += 1
                self._discard(queue)
        elif kind in _KEPT:
            queue = self._kept
            if queue is _NONE:
                queue = self._kept = self._new_queue()
            self._items.append(queue)
            queue.append(event)
        else:
            queue = self._control
            if queue is _NONE:
                queue = self._control = self._new_queue()
            self._items.append(queue)
            queue.append(event)
            if len(queue) > self.control_capacity:
                self._skip_control += 1
                self._discard(queue)
        if self._readers.futures is not None:  # the first event since readers began to wait
            self._readers.wake()

    def put_all(self, events: Sequence[SessionEvent]) -> None:
        """Queue ``events`` in order, as a ``put`` of each would. When they all fit below every
        capacity (the common case: a turn's calls started, a message's answers settled) no
        policy can apply, so they go in with one room check and one wake-up for them all."""
        if len(self._items) - self._discarded + len(events) > min(
            self.capacity, self.control_capacity, self.settled_capacity
        ):
            for event in events:
                self.put(event)
            return
        items = self._items
        if items is _NONE:
            items = self._items = deque()
        kind: type | None = None
        queue = _NONE
        for event in events:
            if type(event) is not kind:  # a run of one kind shares its queue
                kind = type(event)
                queue = self._queue_of(kind)
            items.append(queue)
            queue.append(event)
        if self._readers.futures is not None:
            self._readers.wake()

    def _queue_of(self, kind: type) -> deque[SessionEvent]:
        """The queue events of ``kind`` wait in, made by its first event."""
        if kind in _MEDIA:
            if self._media is _NONE:
                self._media = self._new_queue()
            return self._media
        if kind is ToolCallSettled:
            if self._settled is _NONE:
                self._settled = self._new_queue()
            return self._settled
        if kind in _KEPT:
            if self._kept is _NONE:
                self._kept = self._new_queue()
            return self._kept
        if self._control is _NONE:
            self._control = self._new_queue()
        return self._control

    def _new_queue(self) -> deque[SessionEvent]:
        """A kind's first event: its queue (and the first event's, ``_items``)."""
        if self._items is _NONE:
            self._items = deque()
        return deque()

    @property
    def closed(self) -> bool:
        """No more events will come (those waiting can still be read)."""
        return self._closed

    def close(self) -> None:
        """No more events will come; readers finish after the last one."""
        self._closed = True
        self._readers.wake()

    async def get(self) -> SessionEvent | None:
        """The next event, waiting for one; ``None`` once closed and drained."""
        while True:
            event = self.get_nowait()
            if event is not None or self._closed:
                return event
            await self.wait()

    async def wait(self) -> None:
        """Return once an event is waiting or the buffer is closed (at once if so already)."""
        if not (len(self) or self._pending_drops or self._closed):
            await self._readers.wait()

    def get_nowait(self) -> SessionEvent | None:
        """The next event if one is waiting, else ``None``."""
        return next(self.ready(), None)

    def __len__(self) -> int:
        return len(self._items) - self._discarded

    def ready(self) -> Iterator[SessionEvent]:
        """The events waiting, each taken off the buffer only when the caller asks for it:
        a reader that stops early leaves the rest queued. Ends when none is waiting."""
        # Made by the first event, then never replaced (compacted in place): a reader that
        # starts before it returns at once, and one suspended at a yield has the real one.
        items = self._items
        while True:
            if self._pending_drops:  # discards since the last read come first
                yield self._take_drops()
                continue
            if not items:
                return
            queue = items.popleft()
            if self._discarded and self._stale(queue):
                continue
            yield queue.popleft()

    async def stream(self) -> AsyncIterator[SessionEvent]:
        """Every event in order, waiting for each; ends once closed and drained. As in
        ``ready``, each is taken off the buffer only when the reader asks for it; the same loop
        in the reader's own generator: no generator of ``ready`` resumed per event."""
        while True:
            items = self._items  # the real one once an event came (``ready`` says why)
            while True:
                if self._pending_drops:
                    yield self._take_drops()
                    continue
                if not items:
                    break
                queue = items.popleft()
                if self._discarded and self._stale(queue):
                    continue
                yield queue.popleft()
            if self._closed:  # and every event was read
                return
            await self.wait()

    def _stale(self, queue: deque[SessionEvent]) -> bool:
        """Whether the tag of ``queue`` just read stood for an event discarded since."""
        if queue is self._media:
            if not self._skip_media:
                return False
            self._skip_media -= 1
        elif queue is self._control:
            if not self._skip_control:
                return False
            self._skip_control -= 1
        elif queue is self._settled:
            if not self._skip_settled:
                return False
            self._skip_settled -= 1
        else:
            return False
        self._discarded -= 1
        return True

    def _take_drops(self) -> EventsDropped:
        dropped = EventsDropped(
            self._pending_drops,
            self._pending_media,
            self._pending_control,
            self._pending_settled,
        )
        self._pending_drops = self._pending_media = self._pending_control = 0
        self._pending_settled = {}
        return dropped

    def _discard_media(self) -> None:
        self._skip_media += 1
        self._discard(self._media)

    def _discard(self, queue: deque[SessionEvent]) -> None:
        """Discard the oldest waiting event of ``queue`` (its skip count is raised already)."""
        self._count_drop(queue.popleft())
        self._discarded += 1
        if self._discarded > 64 and self._discarded > len(self):  # compact, in place: one
            self._compact()  # deque for the readers, even one suspended in ``ready``

    def _compact(self) -> None:
        """Take the stale tags out of ``_items``: for each kind, its first ones."""
        skips = {
            id(queue): count
            for queue, count in (
                (self._media, self._skip_media),
                (self._control, self._skip_control),
                (self._settled, self._skip_settled),
            )
            if count
        }
        kept: list[deque[SessionEvent]] = []
        for queue in self._items:
            count = skips.get(id(queue))
            if count:
                skips[id(queue)] = count - 1
            else:
                kept.append(queue)
        self._items.clear()
        self._items.extend(kept)
        self._discarded = self._skip_media = self._skip_control = self._skip_settled = 0

    def _count_drop(self, event: SessionEvent) -> None:
        self.dropped += 1
        self._pending_drops += 1
        if isinstance(event, ToolCallSettled):
            settled, ending = self._pending_settled, event.ending
            settled[ending] = settled.get(ending, 0) + 1
        elif type(event) in _MEDIA:
            self._pending_media += 1
        else:
            self._pending_control += 1


def record_of(event: object, session_id: str | None) -> Event | None:
    """The observers' view of an app event, if it has one: ``Resumed`` is a ``Reconnected``,
    ``Closed`` a ``SessionClosed``."""
    if isinstance(event, Closed):
        return SessionClosed(session_id, event.reason)
    if isinstance(event, Resumed):
        return Reconnected(session_id, event.reason)
    return None
