"""``LiveProtocol``: the skeleton every vendor's protocol fills in.

A protocol is sans-I/O (``livebridge.protocol.actions``): the shell feeds it decoded server
messages, app input and the time, and it answers with session events and actions. Most of that
is the same on every vendor, so it is written once here: the connection table, the call ledger,
the outbox, the reconnect budget and the reporter, and what is done with them when a connection
opens, is lost or closes, when a handler settles and when the writer sends. A vendor's subclass
holds only its differences, as the hooks below:

- ``receive``: reading its server messages;
- ``_classify`` and ``_first_failure``: what a closed socket means to it, ``_reconnect`` when it
  decides a reconnect itself (Gemini's handle, its ``goAway``), ``_dropped``, ``_reopen`` and
  ``_closing`` for state of its own a connection takes with it;
- ``_answer_item``, ``client_kinds`` and ``_input_sent``: how its answers go on the wire, how
  its client messages are named in metrics, and what the app's input sent means to it;
- ``input_rate``, ``input_encoding`` and ``truncate``: its audio.

Each brings its own answer encoder and frame budget to the ledger through ``__init__``.

Every method takes the time as an argument and returns outputs; none awaits. The shell sends
``frame(next_item())`` and confirms with ``sent(item)``, or hands a failed send back with
``unsent(item)``; it never looks inside a message.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, ClassVar, Literal, Protocol

from livebridge.calls.call import AnswerEncoder, Outcome, Partial
from livebridge.calls.ledger import CallLedger
from livebridge.calls.lives import Outgoing
from livebridge.calls.observers import SessionOpened
from livebridge.calls.tools import ToolRegistry
from livebridge.errors import LivebridgeError
from livebridge.protocol.actions import (
    CancelCalls,
    ConnectionState,
    ConnectionTable,
    Finish,
    Notify,
    Output,
    ProtocolOptions,
    Reconnect,
    Retries,
    ended_by_service,
)
from livebridge.protocol.events import Closed, Resumed
from livebridge.protocol.outbox import Outbox
from livebridge.protocol.reporter import Reporter
from livebridge.protocol.resume import CloseDecision
from livebridge.protocol.transport import ClientItem, Frames, Signal, Text, Transport

#: A hook that hides what a recording or a trace must not keep: ``(function, value) -> value``.
Redact = Callable[[str, dict[str, Any]], dict[str, Any]]

#: The session's own log, where every protocol writes.
log = logging.getLogger("livebridge.live.session")


class LiveProtocol(ABC):
    """What the session shell asks of a vendor's protocol (``GeminiLiveProtocol``,
    ``OpenAIRealtimeProtocol``), and the part of it every vendor shares."""

    vendor: ClassVar[str]
    #: A new connection starts an empty conversation (nothing resumes): ``Resumed.fresh``.
    fresh_on_reconnect: ClassVar[bool] = False
    #: The ledger's reasons for fates, rewritten in the vendor's own words.
    reasons: ClassVar[Mapping[str, str] | None] = None

    @property
    def wire_name(self) -> str:
        """The wire this protocol speaks, as a recording names it: the vendor's name, unless
        the vendor's client speaks more than one (GPT-Live on an OpenAI client)."""
        return self.vendor

    def recording_codec(self) -> WireCodec | None:
        """What a recording writes of this wire; None for a wire not recorded yet."""
        return None

    def __init__(
        self,
        tools: ToolRegistry,
        options: ProtocolOptions | None,
        *,
        observed: bool,
        delays: Iterator[float] | None,
        encode: AnswerEncoder,
        frame_budget: int | None = None,
    ) -> None:
        """``tools``: the app's registry as the model's profile adapted it; ``observed``:
        produce ``Notify`` outputs (skip the work when nobody listens); ``delays``: the waits
        before reconnects (default ``resume.backoff()``); ``encode``: each answer's wire dict;
        ``frame_budget``: the ledger's bound on one message of answers (default
        ``options.max_frame_bytes``)."""
        self.options = options or ProtocolOptions()
        self.tools = tools
        self.handle: str | None = None
        self.session_id: str | None = None
        self.turn = 0
        self.connection = ConnectionTable()
        budget = self.options.max_frame_bytes if frame_budget is None else frame_budget
        #: The shell proves reads to it (``reads_proven``, ``read_through``).
        self.ledger = CallLedger(encode=encode, max_frame_bytes=budget)
        self.outbox = Outbox(
            self.options.audio_during_blocking,
            self.options.held_audio_seconds,
            self.options.outbox_bytes,
        )
        self._observed = observed
        self._retries = Retries(self.options.reconnect_attempts, delays)
        self._opened = False
        self._leaving = False  # the app is leaving: calls that arrive now are answered, not run
        self._lost: tuple[str, LivebridgeError | None] = ("connect", None)
        self._report = Reporter(tools, observed, lambda: self.session_id)
        self._user_done: float | None = None  # when the user's turn ended, awaiting output
        self._first_output: float | None = None  # seconds from then to the model's first

    # -- queries ---------------------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        return self.connection.state

    @property
    def idle(self) -> bool:
        """No call is waiting for its fate."""
        return self.ledger.idle

    @property
    def answers_ready(self) -> bool:
        """An answer waits for the writer (a settled call only wakes it then)."""
        return self.ledger.answers_ready

    @property
    def switch_ready(self) -> bool:
        """The connection may be left: every call is answered."""
        return self.ledger.idle

    @property
    def send_directly(self) -> bool:
        """App audio may skip the outbox: nothing queued, no call pending."""
        return not self.outbox and self.ledger.idle

    def answer_seen(self, call_id: str) -> bool:
        """Could the model have seen this call's answer? (The re-issue rule asks.)"""
        return self.ledger.answer_seen(call_id)

    # -- connections -----------------------------------------------------------------------

    def opened(self, session_id: str | None, now: float) -> list[Output]:
        """A connection is open and set up (the session's first, or one after a loss)."""
        self.connection.move("open")
        resumed = self._opened
        self._opened = True
        self._retries.attempts = 0
        self.session_id = self.session_id or session_id
        out: list[Output] = []
        if not resumed and self._observed:
            out.append(Notify(SessionOpened(self.session_id)))
        orphaned = self._reopen(resumed, now, out)
        if resumed:
            reason, error = self._lost
            out.append(Resumed(reason, tuple(orphaned), error, fresh=self.fresh_on_reconnect))
        self._fates(out)
        return out

    def lost(
        self, code: int | None, reason: str, now: float, *, error: LivebridgeError | None = None
    ) -> Reconnect | Finish:
        """The connection ended with ``code``/``reason`` (None: no close frame).

        ``error``: what livebridge itself found wrong (it closed the socket). Returns whether
        to reconnect or to finish; after ``Finish`` the shell calls ``close``.
        """
        decision = self._classify(code, reason)
        log.info("connection closed (%s %r): %s", code, reason, decision.reason)
        cause = error or decision.error
        self.ledger.disconnected()
        self._dropped()
        if not self._opened:  # nothing was lost yet: say why connecting failed
            failure = self._first_failure(code, reason, decision, error)
            return Finish(Closed("the first connection failed", failure))
        self.connection.move("lost")
        if decision.action == "end":
            return ended_by_service(cause)
        self._lost = (decision.reason, cause)
        step = self._reconnect(decision, cause)
        return step if step is not None else self._retries.next(decision.reason, cause)

    def shutdown(self) -> list[str]:
        """Run no new call; returns the ids still running (cancel them after the grace)."""
        self._leaving = True
        return self.ledger.shutdown()

    def close(self, closed: Closed, now: float) -> list[Output]:
        """The session is over: every call without a fate is orphaned, its handler cancelled."""
        if self.state == "closed":
            return []
        self.connection.move("close")
        out: list[Output] = []
        why = f"the session ended: {closed.reason}"
        orphaned = self._report.close(self.ledger, now, why, out, reasons=self.reasons)
        self._closing(why, now, out)
        if orphaned:
            out.append(CancelCalls(orphaned))
        self._report.flush_seen(out)
        out.append(closed)  # observers hear it as ``SessionClosed`` (``events.record_of``)
        return out

    # -- handlers and the writer -----------------------------------------------------------

    def settled(self, outcome: Outcome) -> list[Output]:
        """A handler's final outcome (from the dispatcher)."""
        ledger = self.ledger
        ledger.settle(outcome)
        out: list[Output] = []
        if ledger.waiting:  # mostly not: an answered call's fate is reported when it is sent
            self._report.fates(ledger, out, reasons=self.reasons)
        return out

    def partial(self, item: Partial) -> list[Output]:
        """A streaming handler yielded ``item``."""
        self.ledger.partial(item)
        out: list[Output] = []
        self._fates(out)
        return out

    def next_item(self, now: float) -> Outgoing | ClientItem | None:
        """What the writer sends next: tool answers first, then the app's input in order.

        Audio held during a blocking call goes out as soon as the call is answered, ahead of
        newer input.
        """
        ledger = self.ledger
        if ledger.idle:  # nothing to answer and nothing blocking: the common case
            return self.outbox.take(blocking=False)
        answers = ledger.drain(now)
        if answers is not None:
            return answers
        return self.outbox.take(blocking=ledger.blocking_pending)

    def frame(self, item: Outgoing | ClientItem) -> ClientItem:
        """What the transport sends for ``item``: answers in the vendor's own message."""
        if isinstance(item, Outgoing):
            return self._answer_item(item)
        return item

    def unsent(self, item: Outgoing | ClientItem) -> None:
        """``item`` did not leave (the connection ended): app input goes back to the front;
        the ledger requeues its own answers (``disconnected``), and composed frames are
        composed again."""
        if not isinstance(item, Outgoing | Frames):
            self.outbox.push_front(item)

    def sent(self, item: Outgoing | ClientItem, now: float) -> list[Output]:
        """``item`` left on the socket."""
        out: list[Output] = []
        if isinstance(item, Outgoing):
            self.ledger.sent(item, now)
            self._report.answers(item, out)
            self._fates(out)
        else:
            if _ends_user_turn(item):
                self._user_turn_ended(now)
            self._input_sent(item, now, out)
        if self._observed:
            sent = self._answer_item(item) if isinstance(item, Outgoing) else item
            for kind in self.client_kinds(sent):
                self._report.count("sent", kind, out)
        return out

    def take_fates(self) -> list[Output]:
        """Fates decided since the last look (e.g. by ``drain``), as outputs."""
        out: list[Output] = []
        self._fates(out)
        return out

    def _fates(self, out: list[Output]) -> None:
        if self.ledger.waiting:  # mostly nothing is: no call into the reporter
            self._report.fates(self.ledger, out, reasons=self.reasons)

    # -- turns, as the user waits for them --------------------------------------------------

    def _user_turn_ended(self, now: float) -> None:
        """The user finished speaking or typing: the wait for the model's answer starts."""
        self._user_done = now
        self._first_output = None

    def _model_output(self, now: float) -> None:
        """The model sent audio or text: the first since the user's turn ended ends the wait."""
        if self._user_done is not None and self._first_output is None:
            self._first_output = now - self._user_done

    def _model_turn_ended(self, tokens: tuple[int | None, int | None], out: list[Output]) -> None:
        """The model's turn is over: report it, and wait for the next user turn."""
        self._report.turn(self._first_output, tokens, out)
        self._user_done = self._first_output = None

    # -- what each vendor says for itself --------------------------------------------------

    @abstractmethod
    def receive(self, message: Any, now: float) -> list[Output]:
        """A decoded server message arrived: every message enters here."""

    @abstractmethod
    def input_rate(self, rate: int | None) -> int:
        """The rate to send app audio at, for the rate the app names (None: it named none)."""

    @property
    @abstractmethod
    def input_encoding(self) -> Literal["pcm16", "pcmu"]:
        """What ``send_audio`` takes."""

    @abstractmethod
    def truncate(self, played: float) -> Frames | None:
        """What tells the service the user heard only ``played`` seconds of the last audio."""

    @abstractmethod
    def _classify(self, code: int | None, reason: str) -> CloseDecision:
        """What a socket closed with ``code``/``reason`` means: resume, retry or end."""

    @abstractmethod
    def _first_failure(
        self, code: int | None, reason: str, decision: CloseDecision, error: LivebridgeError | None
    ) -> LivebridgeError:
        """What the app is told when the session's first connection never opened."""

    def _reconnect(
        self, decision: CloseDecision, cause: LivebridgeError | None
    ) -> Reconnect | Finish | None:
        """A step the vendor decides itself on a loss; None: the usual retries."""
        return None

    def _dropped(self) -> None:
        """The connection is gone: forget what only it knew (by default, nothing)."""
        return None

    def _reopen(self, resumed: bool, now: float, out: list[Output]) -> list[str]:
        """Carry the calls over to a new connection (resuming ``handle`` unless it is the
        first); returns the ids of those it could not carry."""
        return self.ledger.resumed(self.handle if resumed else None, now)

    def _closing(self, why: str, now: float, out: list[Output]) -> None:
        """The session is closing: report what the vendor itself still holds (by default,
        nothing)."""
        return None

    @abstractmethod
    def _answer_item(self, answers: Outgoing) -> ClientItem:
        """The message that carries the ledger's ``answers``."""

    @staticmethod
    @abstractmethod
    def client_kinds(item: ClientItem) -> Sequence[str]:
        """The vendor's names of the messages that carry ``item`` (for metrics)."""

    def _input_sent(self, item: ClientItem, now: float, out: list[Output]) -> None:
        """The app's ``item`` (or a message the protocol composed) left on the socket."""
        return None


def _ends_user_turn(item: ClientItem) -> bool:
    """Text, or speech marked as ended: the model's answer is due from now."""
    return isinstance(item, Text) or (isinstance(item, Signal) and item.kind != "activity_start")


class Connector(Protocol):
    """Opens one Live connection at a time for a session, and names the protocol it speaks."""

    def protocol(
        self, tools: ToolRegistry, options: ProtocolOptions, *, observed: bool
    ) -> LiveProtocol:
        """A new protocol state machine for the messages this connector's transports yield."""
        ...

    def open(self, handle: str | None) -> AbstractAsyncContextManager[Transport]:
        """Connect, resuming ``handle`` (None: a fresh session); leaving closes the connection.

        Every way the connection fails or ends is raised as ``errors.TransportClosed``.
        """
        ...


class WireCodec(Protocol):
    """What a recording (``livebridge.recording``) writes of one vendor's wire; the vendor
    gives its own through ``LiveProtocol.recording_codec``."""

    @property
    def name(self) -> str:
        """The header's ``vendor``."""
        ...

    def server(self, message: Any) -> dict[str, Any]:
        """A decoded server message as JSON-able builtins."""
        ...

    def client(self, item: ClientItem) -> list[dict[str, Any]]:
        """The client messages that carry ``item``, one per frame."""
        ...

    def scrub(
        self,
        message: dict[str, Any],
        *,
        keep_audio: bool,
        redact: Redact | None,
    ) -> None:
        """Reduce audio to its length (unless kept) and redact calls and answers, in place."""
        ...
