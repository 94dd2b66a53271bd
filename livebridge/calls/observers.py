"""Lifecycle events of calls, turns and sessions, delivered to observers.

A session's own life has one vocabulary: the app's ``Resumed`` and ``Closed`` events. The
observers' ``Reconnected`` and ``SessionClosed`` are their views
(``livebridge.protocol.events.record_of``), made by the session shell as it delivers them;
nothing emits them a second time.

The core emits these and knows nothing of what listens: metrics, traces and the app's own
hooks are all observers. An observer that raises is logged and never disturbs a call.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias

from livebridge.calls.call import Behavior, Call, Outcome

log = logging.getLogger("livebridge.calls.observers")

Direction = Literal["sent", "received"]


@dataclass(frozen=True, slots=True)
class CallStarted:
    """A handler is about to run (after validation and limits admitted it)."""

    session_id: str | None
    turn: int
    call: Call
    behavior: Behavior
    started_at: float  # time.monotonic()


@dataclass(frozen=True, slots=True)
class CallSettled:
    """A call reached its outcome (including rejections that never ran a handler)."""

    session_id: str | None
    turn: int
    call: Call
    behavior: Behavior
    outcome: Outcome
    started_at: float  # time.monotonic() when the call was received
    known_function: bool  # False when the name is not in the registry
    server: str | None = None  # the MCP server whose tool it is (``livebridge.mcp``)


@dataclass(frozen=True, slots=True)
class CallOrphaned:
    """A call whose answer can never be delivered (the connection that knew it is gone).

    A fate, not a handler outcome: the handler's own ``CallSettled`` may come before or after.
    """

    session_id: str | None
    call_id: str
    name: str
    behavior: Behavior
    reason: str
    known_function: bool


@dataclass(frozen=True, slots=True)
class BatchStarted:
    """A group of calls issued together (one ``toolCall``, one model turn) begins."""

    session_id: str | None
    turn: int
    size: int


@dataclass(frozen=True, slots=True)
class BatchSettled:
    """Every call of the batch has its outcome."""

    session_id: str | None
    turn: int
    size: int
    duration: float


@dataclass(frozen=True, slots=True)
class AnswerSent:
    """Answers left the process: ``turnaround`` is from ``toolCall`` received to this send."""

    session_id: str | None
    outcomes: Sequence[Outcome]
    turnarounds: Sequence[float]
    behaviors: Sequence[Behavior]
    known_functions: Sequence[bool]


@dataclass(frozen=True, slots=True)
class SessionOpened:
    session_id: str | None


@dataclass(frozen=True, slots=True)
class SessionClosed:
    session_id: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class Reconnected:
    """The session moved to a new socket; ``reason`` is ``go_away``, ``dropped`` or similar."""

    session_id: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class RecordingTruncated:
    """The session recording reached ``limit`` bytes at ``path``: it stops, the session goes on."""

    path: str
    limit: int


@dataclass(frozen=True, slots=True)
class RecordingFailed:
    """Writing the session recording at ``path`` failed (``reason``: the disk is full, ...):
    the recording stops there, the session goes on without it."""

    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class TurnMeasured:
    """The model finished a turn. ``first_output``: seconds from the end of the user's turn as
    the session saw it (text sent, ``send_activity_end``/``send_audio_stream_end``, OpenAI's
    ``speech_stopped``) to the model's first audio or text; ``None`` when no user turn ended
    before it (a reply to a tool answer, audio the service judged itself). Tokens are the
    service's usage for the turn, where it reports them."""

    session_id: str | None
    first_output: float | None
    input_tokens: int | None
    output_tokens: int | None


@dataclass(frozen=True, slots=True)
class MessageSeen:
    """``count`` wire messages; ``kind`` is their top-level field (``toolCall``, ...).

    A session counts messages locally and reports them in batches (see ``LiveSession``).
    """

    session_id: str | None
    direction: Direction
    kind: str
    count: int = 1


@dataclass(frozen=True, slots=True)
class StoreOperation:
    """One call to the conversation store (``livebridge.store``) and how long it took.

    ``error`` is None when it worked, else ``unavailable`` (down, slow, full), ``lease_lost``,
    ``busy`` or ``dropped`` (a deferred write discarded because too many were waiting).
    """

    operation: str
    seconds: float
    error: str | None = None


#: ``acquired``; ``resumed``: taken with a stored handle or journal; ``busy``: refused, another
#: worker holds it; ``lost``: another worker took it over; ``released``.
LeaseEvent = Literal["acquired", "resumed", "busy", "lost", "released"]


@dataclass(frozen=True, slots=True)
class LeaseChanged:
    """This session's hold on its conversation changed; ``interrupted`` counts calls found
    started without a result (a previous owner died while running them)."""

    event: LeaseEvent
    interrupted: int = 0


Event: TypeAlias = (
    CallStarted
    | CallSettled
    | CallOrphaned
    | BatchStarted
    | BatchSettled
    | AnswerSent
    | SessionOpened
    | SessionClosed
    | Reconnected
    | MessageSeen
    | TurnMeasured
    | RecordingTruncated
    | RecordingFailed
    | StoreOperation
    | LeaseChanged
)


class Observer(Protocol):
    """Anything with ``on_event``; called synchronously, so keep it cheap."""

    def on_event(self, event: Event) -> None: ...


def emit(observers: Iterable[Observer], event: Event) -> None:
    """Deliver ``event`` to each observer; a failing observer is logged, never propagated."""
    for observer in observers:
        try:
            observer.on_event(event)
        except Exception:
            log.exception("observer %r failed on %s", observer, type(event).__name__)


class Recorder:
    """An observer that keeps every event; handy in tests and for the app's own reports."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def on_event(self, event: Event) -> None:
        self.events.append(event)

    def of(self, kind: type[Any]) -> list[Any]:
        """The recorded events of one type, in order."""
        return [e for e in self.events if isinstance(e, kind)]
