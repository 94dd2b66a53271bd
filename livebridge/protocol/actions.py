"""What every live protocol shares: the connection state table and the actions it asks for.

A protocol is sans-I/O: the shell feeds it decoded server messages, app input and the time, and
it answers with session events (for the app), observer events and actions (for the shell).
Nothing here awaits, reads a clock or touches a socket. The code every vendor's protocol shares
on top of these is ``LiveProtocol`` (``livebridge.protocol.base``).

One connection at a time moves through this table (the only place the state changes; an event
not in it raises ``ConnectionStateError`` and changes nothing)::

    connecting --open--> ready --go_away--> going_away
         ^                 |                    |
         +------ lost -----+-------- lost ------+     (reconnect, resume with the handle)
    any state --close--> closed                       (terminal)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from livebridge.calls.call import Call
from livebridge.calls.observers import Event
from livebridge.calls.payloads import DEFAULT_MAX_FRAME_BYTES
from livebridge.errors import ConnectionStateError, LivebridgeError
from livebridge.protocol import resume
from livebridge.protocol.events import Closed, SessionEvent
from livebridge.protocol.outbox import AudioPolicy

ConnectionState = Literal["connecting", "ready", "going_away", "closed"]
ConnectionEvent = Literal["open", "message", "go_away", "lost", "close"]

_TABLE: Final[dict[tuple[ConnectionState, ConnectionEvent], ConnectionState]] = {
    ("connecting", "open"): "ready",
    ("connecting", "lost"): "connecting",
    ("connecting", "close"): "closed",
    ("ready", "message"): "ready",
    ("ready", "go_away"): "going_away",
    ("ready", "lost"): "connecting",
    ("ready", "close"): "closed",
    ("going_away", "message"): "going_away",
    ("going_away", "go_away"): "going_away",  # a repeated goAway changes nothing
    ("going_away", "lost"): "connecting",
    ("going_away", "close"): "closed",
    ("closed", "close"): "closed",  # closing twice is harmless
}


class ConnectionTable:
    """The state of the current connection; ``move`` is the one gate that changes it."""

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state: ConnectionState = "connecting"

    def move(self, event: ConnectionEvent) -> ConnectionState:
        target = _TABLE.get((self.state, event))
        if target is None:
            raise ConnectionStateError(f"a connection that is {self.state} cannot take {event!r}")
        self.state = target
        return target


@dataclass(frozen=True, slots=True)
class RunCalls:
    """Run these admitted calls as one dispatcher batch, in turn ``turn``.

    ``refuse``: they arrived while the app is leaving; answer them without running them.
    ``partials``: stream an async-generator handler's items as they come; without it they are
    collected into one final answer (a vendor that takes one output per call).
    ``confirmed``: the model's turn that issued them can no longer be withdrawn (OpenAI
    Realtime runs calls at a ``completed`` ``response.done``); False (Gemini, whose calls come
    mid-generation): an irreversible tool's call waits for a ``ConfirmCalls`` naming it, or for
    ``CallPolicy.confirm_window`` seconds of silence. A new vendor's protocol gives both.
    """

    calls: Sequence[Call]
    turn: int
    refuse: bool = False
    partials: bool = True
    confirmed: bool = True


@dataclass(frozen=True, slots=True)
class ConfirmCalls:
    """The turn that issued these calls (``RunCalls(confirmed=False)``) is confirmed, or
    ``withdrawn`` (why): their irreversible handlers start, or never run (``cancelled``)."""

    call_ids: Sequence[str]
    withdrawn: str | None = None


@dataclass(frozen=True, slots=True)
class CancelCalls:
    """Cancel the handlers of these calls (their fate is already decided)."""

    call_ids: Sequence[str]


@dataclass(frozen=True, slots=True)
class SwitchConnection:
    """Leave this connection once ``switch_ready`` is true, or at ``deadline`` at the latest."""

    deadline: float


@dataclass(frozen=True, slots=True)
class Notify:
    """Give ``event`` to the observers (metrics, traces)."""

    event: Event


@dataclass(frozen=True, slots=True)
class Reconnect:
    """Open a new connection after ``delay`` seconds, resuming with the newest handle."""

    reason: str
    delay: float


@dataclass(frozen=True, slots=True)
class Finish:
    """The session is over: cancel what still runs, deliver ``closed`` and stop."""

    closed: Closed


class Retries:
    """Reconnects since a connection last opened, against ``reconnect_attempts``, and the delay
    before each: ``delays``, else ``resume.backoff()``, made at the first reconnect (a generator
    holds memory from the start, and most sessions never reconnect)."""

    __slots__ = ("_delays", "_limit", "attempts")

    def __init__(self, limit: int, delays: Iterator[float] | None = None) -> None:
        self._limit = limit
        self._delays = delays
        self.attempts = 0

    def next(self, reason: str, cause: LivebridgeError | None) -> Reconnect | Finish:
        """One more reconnect, or the end once ``limit`` of them failed in a row."""
        self.attempts += 1
        if self.attempts > self._limit:
            return Finish(Closed(f"gave up after {self.attempts - 1} reconnects", cause))
        if self._delays is None:
            self._delays = resume.backoff()
        return Reconnect(reason, next(self._delays))


def ended_by_service(cause: LivebridgeError | None) -> Finish:
    """The service ended the session on purpose (a close code that means "do not retry")."""
    text = f"session ended: {cause}" if cause else "the service closed the session"
    return Finish(Closed(text, cause))


Action: TypeAlias = RunCalls | CancelCalls | ConfirmCalls | SwitchConnection | Notify


#: What a protocol hands the shell: an event for the app, or an action.
Output: TypeAlias = SessionEvent | Action


@dataclass(frozen=True, slots=True)
class ProtocolOptions:
    """The protocol's share of ``SessionOptions`` (see there for what each means); the
    defaults written here are the session's too."""

    audio_during_blocking: AudioPolicy = "hold"
    held_audio_seconds: float = 10.0
    outbox_bytes: int = 1024 * 1024
    reconnect_attempts: int = 5
    go_away_margin: float = 1.0
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES  # from ``CallPolicy``: one answer frame
