"""The tool-call contract both protocols' checkers judge: a call's life, what became of it, and
how a breach is reported (no I/O).

A call's life is one table, ``TRANSITIONS``: a checker changes a call's state only through
``move``, and a move the table does not hold raises and changes nothing, so a call's life reads
the same on Gemini Live and OpenAI Realtime. ``CallChecker`` is what the two checkers share: the
calls of one connection, the report of a breach as a ``Violation``, and the verdict on the calls
still open when the connection ends.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from livebridge.errors import LocalProtocolError

Severity = Literal["error", "warning"]
CallState = Literal["pending", "streaming", "answered", "cancelled", "superseded", "withdrawn"]
CallEvent = Literal["answer", "stream", "cancel", "supersede", "withdraw"]
#: How a connection ended, as far as the contract is concerned.
Ending = Literal["client_close", "client_crash", "server_close"]

#: A call's life: (state, event) -> next state. Nothing else moves a call.
TRANSITIONS: dict[tuple[CallState, CallEvent], CallState] = {
    ("pending", "answer"): "answered",
    ("pending", "stream"): "streaming",
    ("pending", "cancel"): "cancelled",
    ("pending", "supersede"): "superseded",
    ("pending", "withdraw"): "withdrawn",
    ("streaming", "stream"): "streaming",
    ("streaming", "answer"): "answered",
    ("streaming", "cancel"): "cancelled",
    ("streaming", "supersede"): "superseded",
    ("streaming", "withdraw"): "withdrawn",
    # The service dropped the call without telling the client; a late answer is no fault.
    ("withdrawn", "answer"): "answered",
    ("withdrawn", "stream"): "withdrawn",
    ("withdrawn", "supersede"): "superseded",
    ("superseded", "answer"): "answered",
    ("superseded", "stream"): "superseded",
}

#: Default bounds of the timing checks (``Thresholds``), in seconds.
HELD_ANSWERS_SECONDS = 8.0
SERIAL_GAP_SECONDS = 0.05


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The timing checks' bounds, in seconds.

    ``held_answers``: a BLOCKING answer later than this after its ``toolCall`` was held (None:
    not checked). ``serial_gap``: answers of one ``toolCall`` sent one per message, each at least
    this long after the one before, are the shape of a loop awaiting each call in turn.
    """

    held_answers: float | None = HELD_ANSWERS_SECONDS
    serial_gap: float = SERIAL_GAP_SECONDS


@dataclass(frozen=True, slots=True)
class Violation:
    """One breach of the contract by the client."""

    kind: str
    message: str
    offending: dict[str, Any] | None
    session: str
    severity: Severity = "error"


@dataclass(slots=True)
class Answer:
    """Everything the client sent for one call id (every streamed response for NON_BLOCKING)."""

    id: str
    name: str | None
    response: dict[str, Any] | None
    scheduling: str | None = None
    will_continue: bool | None = None
    parts: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class CallRecord:
    """One call the server issued and what became of it."""

    id: str
    name: str
    args: dict[str, Any]
    blocking: bool
    batch: int
    state: CallState = "pending"
    answer: Answer | None = None
    reissue_of: str | None = None
    issued_at: float = 0.0  # the checker's clock when the server sent it
    read_at: float | None = None  # when the client was seen to have read it (its pong)
    nameless: bool = False  # issued without an id: answered by name, in call order
    cancel_read: bool = False  # the client was seen to read its cancellation (its pong)

    @property
    def open(self) -> bool:
        return self.state in ("pending", "streaming")


def move(record: CallRecord, event: CallEvent) -> None:
    """The one place a call changes state; a move the table lacks raises, changing nothing."""
    following = TRANSITIONS.get((record.state, event))
    if following is None:
        raise LocalProtocolError(f"call {record.id}: cannot {event} a {record.state} call")
    record.state = following


class CallChecker:
    """The calls of one connection, and the client's violations reported to ``sink``.

    A protocol's checker names its violation kinds in ``SEVERITIES`` and how it words the calls
    left open at the end (``UNANSWERED``, ``SERVER_CLOSED``, ``CROSSED``).
    """

    #: The protocol's violation kinds, with their severity.
    SEVERITIES: Mapping[str, Severity] = {}
    #: The kind of a call never answered, and what its message adds when the server closed
    #: first or when the call crossed the client's close (it was never seen to read it).
    UNANSWERED = "unanswered"
    SERVER_CLOSED = ""
    CROSSED = ""

    def __init__(
        self,
        session: str,
        sink: Callable[[Violation], None],
        *,
        thresholds: Thresholds | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.session = session
        self.sink = sink
        self.thresholds = thresholds or Thresholds()
        self.clock = clock
        self.calls: dict[str, CallRecord] = {}

    def pending(self) -> list[CallRecord]:
        return [record for record in self.calls.values() if record.open]

    def flag(
        self,
        kind: str,
        text: str,
        offending: dict[str, Any] | None,
        severity: Severity | None = None,
    ) -> None:
        """Report a violation of ``kind`` (severity: as in ``SEVERITIES`` unless given)."""
        severity = severity or self.SEVERITIES[kind]
        self.sink(Violation(kind, text, offending, self.session, severity))

    def check_held(
        self, message: dict[str, Any], flagged: set[str], waited: float, what: str, since: str
    ) -> None:
        """``held_answers`` (once a batch, ``flagged`` remembers): ``what`` came ``waited``
        seconds after ``since``, past ``Thresholds.held_answers``."""
        held = self.thresholds.held_answers
        if held is not None and waited > held and "held" not in flagged:
            flagged.add("held")
            self.flag(
                "held_answers",
                f"{what} sent {waited:.1f} s after {since} (more than {held:g} s): the model "
                "waited in silence; answer fast calls without waiting on slow ones, and time "
                "slow ones out sooner",
                message,
            )

    def check_serial(
        self, message: dict[str, Any] | None, times: list[float], what: str, advice: str
    ) -> None:
        """``serial_answers``: the answers of ``what`` came at ``times`` (the first: when the
        calls could run), each at least ``Thresholds.serial_gap`` after the one before, the
        shape of a loop awaiting each call in turn."""
        gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
        if min(gaps) >= self.thresholds.serial_gap:
            spread = ", ".join(f"{gap * 1000:.0f}" for gap in gaps)
            self.flag(
                "serial_answers",
                f"{what} were answered one after another (gaps of {spread} ms): {advice}",
                message,
            )

    def finish(self, ending: Ending) -> None:
        """The connection ended: every call still open was never answered.

        A client that crashed (1011, or a drop without a close frame) is one ``client_crash``,
        and each call it left open is unanswered as after a normal close: an error once the
        client was seen to read it; when the server closed, or the call crossed the client's
        close, the client had no chance to answer, so it is only a warning.
        """
        pending = self.pending()
        if ending == "client_crash" and pending:
            names = ", ".join(f"{r.id} ({r.name})" for r in pending)
            self.flag("client_crash", f"the client crashed with calls pending: {names}", None)
        for record in pending:
            text = f"call {record.id} ({record.name}) never answered"
            if ending == "server_close":
                self.flag(self.UNANSWERED, text + self.SERVER_CLOSED, None, "warning")
            elif record.read_at is None:
                self.flag(self.UNANSWERED, text + self.CROSSED, None, "warning")
            else:
                self.flag(self.UNANSWERED, text, None)
