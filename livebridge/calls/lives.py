"""What the call ledger records: each delivery's life, the moves between its states, and the
records it hands out (``LiveCall`` in; ``Outgoing``, ``Fate``, ``Notice`` out).

The states and the rules that move a life between them are described in ``livebridge.calls.ledger``;
``TRANSITIONS`` is the only table of them. Per-call records are ``gc=False`` msgspec Structs
(never part of a reference cycle): the history keeps thousands of them, and tracked survivors
make the garbage collector run often and slowly.

Once a life ends, the ledger keeps an ``Ended`` record in its place: the one record of that
delivery the history remembers, so it is small (its fate's fields and what a later delivery of
the id is judged by), never the call's arguments nor its answer's payload. A ``Fate`` is built
from it when asked for. Past the newest fates, a record nothing can change any more gives way
to the one shared record of its fate (``FINAL``): an old id then costs its dict entry alone.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, TypeAlias, cast

import msgspec

from livebridge.calls.call import Behavior, Call, Outcome, Partial, Scheduling
from livebridge.calls.endings import FateKind
from livebridge.errors import LedgerError

CallState = Literal["running", "settled", "ready", "answered", "cancelled", "orphaned"]
Via = Literal["tool_call", "model_turn"]
NoticeKind = Literal["duplicate_delivery", "unknown_cancel", "late_cancel", "dropped_result"]
#: What moves a life from one state to another (not an observer's ``Event``, nor the app's
#: ``SessionEvent``).
Move: TypeAlias = Literal["settle", "partial", "release", "send", "cancel", "orphan"]

TRANSITIONS: dict[tuple[CallState, Move], CallState] = {
    ("running", "partial"): "running",
    ("running", "settle"): "settled",
    ("settled", "release"): "ready",
    ("ready", "send"): "answered",
    ("running", "cancel"): "cancelled",
    ("settled", "cancel"): "cancelled",
    ("ready", "cancel"): "cancelled",
    ("running", "orphan"): "orphaned",
    ("settled", "orphan"): "orphaned",
    ("ready", "orphan"): "orphaned",
    # A handler that ends after its call was withdrawn: accepted, nothing is sent.
    ("cancelled", "partial"): "cancelled",
    ("cancelled", "settle"): "cancelled",
    ("orphaned", "partial"): "orphaned",
    ("orphaned", "settle"): "orphaned",
}
# Three moves every call takes, looked up once; their callers check the state they leave.
SETTLED = TRANSITIONS["running", "settle"]
READY = TRANSITIONS["settled", "release"]
ANSWERED = TRANSITIONS["ready", "send"]
FATE_OF: dict[Move, FateKind] = {"send": "answered", "cancel": "cancelled", "orphan": "orphaned"}
LIVE_STATES: frozenset[CallState] = frozenset({"running", "settled", "ready"})


class LiveCall(msgspec.Struct, frozen=True, gc=False):
    """A call as received, with what the registry says about its tool."""

    call: Call
    behavior: Behavior = "BLOCKING"
    scheduling: Scheduling | None = None  # the tool's default, NON_BLOCKING only
    streaming: bool = False  # the handler is an async generator (NON_BLOCKING only)
    #: The call came without an id: ``call.id`` is the session's own key, never sent.
    anonymous: bool = False


class Answered(msgspec.Struct, frozen=True, gc=False):
    """One response put in an ``Outgoing`` message; ``outcome`` is None for a streamed item."""

    call_id: str
    name: str
    behavior: Behavior
    outcome: Outcome | None
    turnaround: float  # seconds from the call's receipt to this send


class Outgoing(msgspec.Struct, frozen=True, gc=False):
    """One ``toolResponse`` to send now; confirm it with ``CallLedger.sent()``.

    ``function_responses`` are wire dicts from the ledger's encoder; for Live, send them with
    ``session.send_tool_response(function_responses=gemini_live.to_sdk(...))``, or send
    ``gemini_live.tool_response(...)`` on a raw socket.
    """

    function_responses: list[dict[str, Any]]
    answered: list[Answered]
    #: ``function_responses`` as one JSON array, when ``drain`` measured them in one encode:
    #: a transport that sends JSON sends these bytes as they are (no second encode).
    encoded: bytes | None = None


class Fate(msgspec.Struct, frozen=True, gc=False):
    """How one delivery of a call ended; each delivery gets exactly one."""

    call_id: str
    name: str
    behavior: Behavior
    fate: FateKind
    reason: str
    #: The handler's, for a call whose answer was not sent (cancelled or orphaned after it
    #: settled); else 0.0 (an answer sent carries its own, ``Answered.outcome``).
    latency: float
    received_at: float
    ended_at: float


class Notice(msgspec.Struct, frozen=True, gc=False):
    """Something worth a log line that changed no call's fate (duplicates, late cancels...)."""

    kind: NoticeKind
    call_id: str
    detail: str


class Life(msgspec.Struct, eq=False, gc=False):
    """One delivery of a call id, from its receipt to its fate (``CallState``)."""

    call_id: str
    name: str
    behavior: Behavior
    scheduling: Scheduling | None
    streaming: bool
    received_at: float
    seq: int
    epoch: int
    via: tuple[Via, ...]
    batch: BlockingBatch | None = None
    state: CallState = "running"
    outcome: Outcome | None = None
    anonymous: bool = False  # answered by name: in order among its function's anonymous calls
    acknowledged: ClassVar[bool] = False  # an answer not sent yet cannot have been seen


class Ended(msgspec.Struct, eq=False, gc=False):
    """What the history keeps of a delivery once it ended: its fate's fields, and what a later
    delivery of its id is judged by (a twin or a re-issue), never a payload."""

    call_id: str
    name: str
    behavior: Behavior
    state: CallState  # its fate: answered, cancelled or orphaned
    reason: str
    #: The handler's, if it had settled and its answer was not sent (a sent answer carried it).
    latency: float
    received_at: float
    ended_at: float
    epoch: int
    via: tuple[Via, ...]
    settled: bool  # a result came, before or after the fate: a second one is refused
    acknowledged: bool = False  # its answer was sent and a later server message arrived
    #: Never running: in no batch, in no message being received, streaming nothing.
    batch: ClassVar[None] = None
    seq: ClassVar[int] = -1
    streaming: ClassVar[bool] = False

    @property
    def final(self) -> bool:
        """Nothing can change it any more: settled, and its answer (if sent) acknowledged."""
        return self.settled and (self.acknowledged or self.state != "answered")

    def fate(self) -> Fate:
        """The ``Fate`` the ledger reports for this delivery."""
        return Fate(
            self.call_id,
            self.name,
            self.behavior,
            cast(FateKind, self.state),
            self.reason,
            self.latency,
            self.received_at,
            self.ended_at,
        )


class BlockingBatch(msgspec.Struct, gc=False):
    """The BLOCKING calls of one message, answered together once none is running; by id, so
    that lives and their batch form no reference cycle (freed once the history forgets them)."""

    ids: list[str]
    running: int  # counted down as its calls leave running: releasing needs no scan per settle
    split: bool = False  # too large for one frame: its answers go out over several, in order


#: What an old ended delivery that nothing can change any more (``Ended.final``) is judged by,
#: by its fate: every such id shares one of these, and its own record is let go. No twin of it
#: can come any more (both sources are marked seen).
FINAL: dict[CallState, Ended] = {
    state: Ended(
        "",
        "",
        "BLOCKING",
        state,
        "",
        0.0,
        0.0,
        0.0,
        -1,
        ("tool_call", "model_turn"),
        True,
        state == "answered",
    )
    for state in ("answered", "cancelled", "orphaned")
}

#: An answer queued to send, with the life it answers.
Item: TypeAlias = tuple[Life, Outcome | Partial]


def move(life: Life, event: Move) -> None:
    """Move ``life`` by ``event`` as ``TRANSITIONS`` says; raise ``LedgerError`` if it cannot."""
    target = TRANSITIONS.get((life.state, event))
    if target is None:
        raise LedgerError(f"call {life.call_id}: cannot {event} a call that is {life.state}")
    if life.state == "running" and target != "running" and life.batch is not None:
        life.batch.running -= 1
    life.state = target
