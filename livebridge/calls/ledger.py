"""The call ledger: every Live tool call from ``toolCall`` to its one fate, with no I/O.

Everything that decides what is sent for a call lives here. The session shell feeds events in
(calls received, results settled, cancellations, reconnects), asks ``drain()`` for the one
``toolResponse`` to send now and confirms it with ``sent()`` once it left. Nothing here
awaits, reads a clock or touches a socket: times come in as ``now`` arguments, so the whole
ledger is tested with plain function calls.

One delivery of a call id is a *life*. It moves through these states (the table below is the
only place they change; an event not in it raises ``LedgerError`` and changes nothing)::

    running --settle--> settled --release--> ready --send--> answered
       |                   |                   |
       +------ cancel ---> cancelled <---------+   (toolCallCancellation)
       +------ orphan ---> orphaned  <---------+   (resumed without it, closed)

``answered``, ``cancelled`` and ``orphaned`` are the fates: every life ends in exactly one.
A BLOCKING call is released when every call of its batch (the BLOCKING calls of one
``receive()``) has settled or been cancelled, so the whole batch goes out in one message.
A NON_BLOCKING call is released as soon as it settles; its streamed items go out as they come.
A call that came without an id (``LiveCall.anonymous``: Vertex AI) is answered by name, so two
such calls to one function are answered in the order they came: one waits, settled, until every
earlier one of that name is released or has ended.

Identity rules:
- an id that is still live is never run twice: a second delivery is dropped;
- after a life ends, the first copy from the *other* source (``modelTurn`` vs ``toolCall``) on
  the same connection is the twin of the same delivery and is dropped too;
- any other delivery of an ended id is a re-issue: a new life, which the dispatcher answers from
  its cache, so an id is answered again only when the server asked again after its answer.

Could the model have seen an answer? An answer sent on a connection is *acknowledged* once the
server is known to have read it. A server message that arrives after the answer left is no
proof: the server may have sent it before reading the answer (a re-issue of a running call
crosses its answer in flight). Where the transport can prove it (a websocket ping sent behind
the answer, whose pong the server can only send after reading what came before), the shell sets
``reads_proven`` and calls ``read_through(send_number)`` when the pong arrives; elsewhere any
later server message on the connection counts (``server_message()``). ``answer_seen()`` tells
the dispatcher, which treats an identical call whose first answer was not seen as a re-issue of
it rather than a new request.

Frames are bounded: one ``toolResponse`` never encodes to more than ``max_frame_bytes``, every
answer measured, errors and rejections too. The results of a BLOCKING batch, which go out
together, are cut to fit, fairly (the largest first, down to a common cap); a batch too large
for one frame even so (thousands of calls in one turn) is *split*: its answers go out whole, in
call order, over as many frames as they need. NON_BLOCKING answers that do not fit wait for the
next message.

Per-call records are ``gc=False`` msgspec Structs (never part of a reference cycle): the history
keeps thousands of them, and tracked survivors make the garbage collector run often and slowly.
"""

from __future__ import annotations

import itertools
import operator
from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from typing import Any, Literal, NoReturn, TypeAlias

import msgspec

from livebridge.calls import frames, payloads
from livebridge.calls.call import (
    AnswerEncoder,
    Behavior,
    Call,
    Outcome,
    Partial,
    Scheduling,
)
from livebridge.errors import LedgerError as LedgerError

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "Answered",
    "CallLedger",
    "CallState",
    "Fate",
    "FateKind",
    "LedgerError",
    "LiveCall",
    "Notice",
    "NoticeKind",
    "Outgoing",
    "Via",
]

CallState = Literal["running", "settled", "ready", "answered", "cancelled", "orphaned"]
FateKind = Literal["answered", "cancelled", "orphaned"]
Via = Literal["tool_call", "model_turn"]
NoticeKind = Literal["duplicate_delivery", "unknown_cancel", "late_cancel", "dropped_result"]
_Event: TypeAlias = Literal["settle", "partial", "release", "send", "cancel", "orphan"]

_TRANSITIONS: dict[tuple[CallState, _Event], CallState] = {
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
# Two moves every call takes, looked up once; their callers check the state they leave.
_SETTLED = _TRANSITIONS["running", "settle"]
_READY = _TRANSITIONS["settled", "release"]
_FATE_OF: dict[_Event, FateKind] = {"send": "answered", "cancel": "cancelled", "orphan": "orphaned"}
_LIVE_STATES: frozenset[CallState] = frozenset({"running", "settled", "ready"})
_MAX_HANDLES = 16
DEFAULT_MAX_FRAME_BYTES = payloads.DEFAULT_MAX_FRAME_BYTES
_ENVELOPE_BYTES = 64  # the message around the responses, with room to spare
_call_id = operator.attrgetter("call.id")
_streaming = operator.attrgetter("streaming")


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
    outcome: Outcome | None  # the answer sent, or the result that was withheld (if any)
    received_at: float
    ended_at: float


class Notice(msgspec.Struct, frozen=True, gc=False):
    """Something worth a log line that changed no call's fate (duplicates, late cancels...)."""

    kind: NoticeKind
    call_id: str
    detail: str


class _Life(msgspec.Struct, eq=False, gc=False):
    call: Call
    behavior: Behavior
    scheduling: Scheduling | None
    streaming: bool
    received_at: float
    seq: int
    epoch: int
    via: tuple[Via, ...]
    batch: _Batch | None = None
    state: CallState = "running"
    outcome: Outcome | None = None
    acknowledged: bool = False  # its answer was sent and a later server message arrived
    anonymous: bool = False  # answered by name: in order among its function's anonymous calls


class _Batch(msgspec.Struct, gc=False):
    """The BLOCKING calls of one message, answered together once none is running; by id, so
    that lives and their batch form no reference cycle (freed once the history forgets them)."""

    ids: list[str]
    running: int  # counted down as its calls leave running: releasing needs no scan per settle
    split: bool = False  # too large for one frame: its answers go out over several, in order


_Item: TypeAlias = tuple[_Life, Outcome | Partial]  # an answer queued to send; a tuple is cheapest


class CallLedger:
    """Tracks every call of one Live session; see the module docstring for the rules."""

    def __init__(
        self,
        history: int = 4096,
        *,
        encode: AnswerEncoder,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        """``history``: how many ended calls (and fates) are remembered, so that a long
        session's memory stays bounded; twins and re-issues are recognised within it.
        ``encode`` builds each answer's wire dict; no message drained is larger than
        ``max_frame_bytes`` once encoded."""
        if history < 1:
            raise ValueError("history must be at least 1")
        if max_frame_bytes < 1024:
            raise ValueError("max_frame_bytes must be at least 1024")
        self._history = history
        self._encode = encode
        self._max_frame_bytes = max_frame_bytes
        #: Answered on this connection, not yet known to be read: (send number, life).
        self._unacknowledged: list[tuple[int, _Life]] = []
        self._sends = 0  # messages of answers sent so far, on every connection
        #: The shell proves reads with ``read_through()``: a server message alone proves none.
        self.reads_proven = False
        self._lives: dict[str, _Life] = {}  # the newest life of each id
        self._live: dict[str, _Life] = {}  # lives without a fate yet, in arrival order
        self._ready: list[_Item] = []
        self._stale = False  # an answer queued may be of a call that ended since: drain filters
        self._backlog = False  # the last drain left answers queued: drain goes unit by unit
        self._in_flight: tuple[Outgoing, list[_Item]] | None = None  # drained, not yet sent()
        self._fates: deque[Fate] = deque(maxlen=history)
        self._untaken = 0  # fates not yet returned by take_fates()
        self._notices: list[Notice] = []
        self._seq = 0  # deliveries admitted so far; a handle knows those below its mark
        self._epoch = 0  # connections opened so far; twins are matched within one
        self._handles: OrderedDict[str, int] = OrderedDict()  # handle -> mark, newest last
        self._connected = True
        #: Anonymous lives not yet released nor ended, by function name, oldest first.
        self._unreleased: dict[str, deque[_Life]] = {}

    # -- queries --------------------------------------------------------------------------

    @property
    def pending_ids(self) -> frozenset[str]:
        """Ids of calls that have no fate yet."""
        return frozenset(self._live)

    @property
    def idle(self) -> bool:
        """No call is waiting for its fate."""
        return not self._live

    @property
    def waiting(self) -> int:
        """Fates and notices not taken yet: a reporter with nothing to take skips its look."""
        return self._untaken + len(self._notices)

    @property
    def answers_ready(self) -> bool:
        """Answers wait for ``drain()`` (some may be of calls that ended meanwhile)."""
        return bool(self._ready)

    @property
    def blocking_pending(self) -> bool:
        """A BLOCKING call has not been answered yet (the model is waiting for it)."""
        return any(life.behavior == "BLOCKING" for life in self._live.values())

    def blocking_ids(self) -> list[str]:
        """The ids of the BLOCKING calls without a fate yet, oldest first."""
        return [i for i, life in self._live.items() if life.behavior == "BLOCKING"]

    @property
    def connected(self) -> bool:
        """A socket is open, so ``drain()`` hands out answers."""
        return self._connected

    def state(self, call_id: str) -> CallState | None:
        """The state of the newest delivery of ``call_id`` (None if never received)."""
        life = self._lives.get(call_id)
        return None if life is None else life.state

    def answer_seen(self, call_id: str) -> bool:
        """Could the model have seen this call's answer? Sent and acknowledged on its connection.

        An id forgotten beyond ``history`` counts as seen: it was answered long ago.
        """
        life = self._lives.get(call_id)
        return life is None or life.acknowledged

    def fates(self) -> list[Fate]:
        """The last ``history`` fates, in the order they happened."""
        return list(self._fates)

    def take_fates(self) -> list[Fate]:
        """The fates that happened since the last call."""
        untaken = min(self._untaken, len(self._fates))
        if not untaken:
            return []
        self._untaken = 0
        # From the newest end: the cost is the fates taken, not the history kept.
        taken = list(itertools.islice(reversed(self._fates), untaken))
        taken.reverse()
        return taken

    def take_notices(self) -> list[Notice]:
        """The notices since the last call."""
        notices, self._notices = self._notices, []
        return notices

    # -- events ---------------------------------------------------------------------------

    def receive(
        self, calls: Sequence[LiveCall], now: float, *, via: Via = "tool_call"
    ) -> list[Call]:
        """Calls arrived in one ``toolCall`` (or one ``modelTurn``); returns the ones to run.

        Run the returned calls as one dispatcher batch. A re-issued id is among them (the
        dispatcher answers it from its cache). After ``shutdown()`` calls are still received:
        the dispatcher answers them ``session_closing`` without running them.
        """
        if not all(map(_call_id, calls)) or any(map(_streaming, calls)):  # in C: no loop
            _check(calls)
        lives, live = self._lives, self._live
        seq, epoch, vias = self._seq, self._epoch, (via,)
        batch = _Batch([], 0)  # the BLOCKING calls admitted (unused if there are none)
        dropped: set[str] = set()  # ids dropped from this message so far
        admitted: list[Call] = []
        for live_call in calls:
            call = live_call.call
            previous = lives.get(call.id)
            if previous is not None and self._drops(previous, via, self._seq, dropped):
                continue
            behavior = live_call.behavior
            if behavior == "BLOCKING":  # validated above: it does not stream
                life = _Life(call, behavior, None, False, now, seq, epoch, vias, batch)
                batch.ids.append(call.id)
            else:
                scheduling, streaming = live_call.scheduling, live_call.streaming
                life = _Life(call, behavior, scheduling, streaming, now, seq, epoch, vias)
            if live_call.anonymous:
                life.anonymous = True
                self._unreleased.setdefault(call.name, deque()).append(life)
            seq += 1
            lives[call.id] = life
            live[call.id] = life
            admitted.append(call)
        self._seq = seq
        batch.running = len(batch.ids)
        return admitted

    def partial(self, item: Partial) -> None:
        """A streaming handler yielded ``item``; it goes out with ``willContinue: true``."""
        life = self._lives.get(item.call_id) or _never_received(item.call_id)
        if life.state == "running" and not life.streaming:
            raise LedgerError(f"call {item.call_id}: {life.call.name} is not a streaming tool")
        self._move(life, "partial")
        if life.state == "running":
            self._ready.append((life, item))
        else:
            self._note("dropped_result", life, f"item for a {life.state} call dropped")

    def settle(self, outcome: Outcome) -> None:
        """A call's final outcome, from the dispatcher.

        An outcome of kind ``cancelled`` for a call the server did not cancel (a handler
        cancelled at shutdown) is an answer like any other: its error payload is sent.
        """
        life = self._lives.get(outcome.call_id) or _never_received(outcome.call_id)
        if life.outcome is not None:
            raise LedgerError(f"call {outcome.call_id} settled twice")
        if outcome.kind == "orphaned":
            raise LedgerError(f"call {outcome.call_id}: only the ledger orphans calls")
        if life.state != "running":  # withdrawn meanwhile (or an illegal move: it raises)
            self._move(life, "settle")
            life.outcome = outcome
            self._note("dropped_result", life, f"result for a {life.state} call dropped")
            return
        life.state = _SETTLED
        life.outcome = outcome
        batch = life.batch
        if batch is None:
            self._release((life,), None)
            return
        batch.running -= 1  # as ``_move`` does for a call leaving running
        if not batch.running:
            self._release(map(self._lives.get, batch.ids), batch)

    def cancel(
        self, call_ids: Iterable[str], now: float, why: str = "cancelled by the server"
    ) -> list[str]:
        """``toolCallCancellation`` (or what the service is known to do instead: ``why``);
        returns the ids whose handlers are still running.

        Nothing is ever sent for a cancelled call. Ids that are unknown or already ended are
        ignored and reported as notices.
        """
        running: list[str] = []
        for call_id in call_ids:
            life = self._lives.get(call_id)
            if life is None:
                self._notices.append(Notice("unknown_cancel", call_id, "cancel for unknown id"))
                continue
            if life.state not in _LIVE_STATES:
                self._note("late_cancel", life, f"cancel for a call already {life.state}")
                continue
            if life.state == "running":
                running.append(call_id)
            self._end([life], "cancel", why, now)
            batch = life.batch
            if batch is not None and not batch.running:  # the rest of its batch may go now
                self._release(map(self._lives.get, batch.ids), batch)
        return running

    def handle_issued(self, handle: str) -> None:
        """``sessionResumptionUpdate`` with ``resumable`` and a new handle.

        The handle knows every call received before it. Only the newest handles are kept.
        """
        if not handle:
            raise LedgerError("a resumption handle cannot be empty")
        handles = self._handles
        handles[handle] = self._seq
        handles.move_to_end(handle)
        while len(handles) > _MAX_HANDLES:
            handles.popitem(last=False)

    def server_message(self) -> None:
        """A server message arrived (call it after handling each one): unless reads are
        proven otherwise, it acknowledges every answer sent before it on this connection."""
        if self._unacknowledged and not self.reads_proven:
            for _, life in self._unacknowledged:
                life.acknowledged = True
            self._unacknowledged = []

    @property
    def sends(self) -> int:
        """The number of the last message of answers sent (0: none yet)."""
        return self._sends

    def read_through(self, number: int) -> None:
        """The server has read every message sent up to send ``number`` on this connection."""
        unacknowledged = self._unacknowledged
        if unacknowledged and unacknowledged[0][0] <= number:
            for sent, life in unacknowledged:
                if sent <= number:
                    life.acknowledged = True
            self._unacknowledged = [item for item in unacknowledged if item[0] > number]

    def disconnected(self) -> None:
        """No socket is open: answers wait for ``resumed()``.

        A message drained but not confirmed by ``sent()`` did not leave: it goes back to the
        front of the queue.
        """
        self._connected = False
        self._unacknowledged = []  # the connection ended before anything confirmed them
        self._requeue_in_flight()

    def resumed(self, handle: str | None, now: float) -> list[str]:
        """A socket opened with ``handle`` (None: a fresh session); returns the orphaned ids.

        Every call the handle does not know is orphaned: its answer will never be sent, and a
        result that arrives later is dropped. The shell may cancel those still running.
        """
        mark = None if handle is None else self._handles.get(handle)
        reason = "fresh session" if handle is None else "not known to the resumed session"
        unknown = [life for life in self._live.values() if mark is None or life.seq >= mark]
        self._end(unknown, "orphan", reason, now)
        orphaned = [life.call.id for life in unknown]
        if handle is None:
            self._handles.clear()
        self._requeue_in_flight()
        self._unacknowledged = []
        self._epoch += 1
        self._connected = True
        return orphaned

    def shutdown(self) -> list[str]:
        """The app is leaving: the ids still running (cancel them after the grace).

        Results that settle later are still answered while a socket is open.
        """
        return [life.call.id for life in self._live.values() if life.state == "running"]

    def close(self, now: float) -> list[str]:
        """The session is over: every call without a fate is orphaned; returns their ids.

        Closing twice is harmless. Results that arrive later are dropped.
        """
        self._connected = False
        self._in_flight = None
        orphaned = list(self._live)
        self._end(list(self._live.values()), "orphan", "session closed", now)
        return orphaned

    def drain(self, now: float) -> Outgoing | None:
        """What is ready to send now, as one ``toolResponse`` within ``max_frame_bytes``.

        None when nothing is ready, no socket is open, or the previous message awaits
        ``sent()``: one message is in flight at a time. What did not fit stays queued.
        """
        if not self._connected or self._in_flight is not None or not self._ready:
            return None
        ready = self._ready
        if self._stale:  # drop the answers of calls cancelled or orphaned since they queued
            self._stale = False
            self._ready = ready = [item for item in ready if item[0].state in _LIVE_STATES]
            if not ready:
                return None
        budget = self._max_frame_bytes - _ENVELOPE_BYTES
        # Commonly all fits, measured in the one encode that is sent; if not (or not last
        # time): unit by unit, and the transport encodes what was taken.
        taken, encoded = ready, None
        if not self._backlog:
            responses = self._encoded(ready)
            encoded = frames.encode(responses)
            if frames.array_size(encoded) > budget:
                encoded = None
        if encoded is None:
            taken, responses, split = frames.take(ready, _unit_of, self._encoded, budget)
            if split:  # the rest of its batch follows, answer by answer, in the next frames
                batch = taken[-1][0].batch
                assert batch is not None  # only a batch is a unit of several answers
                batch.split = True
            for life, answer in taken:
                if isinstance(answer, Outcome):  # cut to fit, it is the answer sent
                    life.outcome = answer
        self._ready = ready[len(taken) :]
        self._backlog = bool(self._ready)
        answered = [
            Answered(
                life.call.id,
                life.call.name,
                life.behavior,
                answer if isinstance(answer, Outcome) else None,
                now - life.received_at,
            )
            for life, answer in taken
        ]
        outgoing = Outgoing(responses, answered, encoded)
        self._in_flight = (outgoing, taken)
        return outgoing

    def sent(self, outgoing: Outgoing, now: float) -> None:
        """The message from ``drain()`` left on the socket: its final answers are answered.

        A call cancelled or orphaned while its answer was being written keeps that fate.
        If the socket closes first, ``disconnected()`` puts the message back in the queue.
        """
        in_flight = self._in_flight
        if in_flight is None or in_flight[0] is not outgoing:
            raise LedgerError("sent() must confirm the message drain() returned last")
        self._in_flight = None
        answered = [
            life
            for life, answer in in_flight[1]
            if life.state == "ready" and isinstance(answer, Outcome)
        ]
        self._end(answered, "send", "sent", now)
        self._sends += 1
        number = self._sends
        self._unacknowledged += [(number, life) for life in answered]

    # -- internals ------------------------------------------------------------------------

    def _drops(self, previous: _Life, via: Via, start: int, dropped: set[str]) -> bool:
        """Whether a delivery of an id already known is dropped (noted): repeated in this
        message (admitted at or after ``start``, or in ``dropped``), still live, or a twin."""
        call_id = previous.call.id
        if previous.seq >= start or call_id in dropped:
            self._note("duplicate_delivery", previous, "id repeated in one message")
            return True
        live = previous.state in _LIVE_STATES
        twin = previous.epoch == self._epoch and via not in previous.via
        if not (live or twin):
            return False  # a re-issue: a new life
        if via not in previous.via:
            previous.via = (*previous.via, via)
        self._note("duplicate_delivery", previous, f"second delivery via {via} dropped")
        dropped.add(call_id)
        return True

    def _encoded(self, items: Sequence[_Item]) -> list[dict[str, Any]]:
        encode = self._encode
        return [
            encode(
                answer,
                behavior=life.behavior,
                scheduling=life.scheduling,
                streaming=life.streaming,
                anonymous=life.anonymous,
            )
            for life, answer in items
        ]

    def _move(self, life: _Life, event: _Event) -> None:
        target = _TRANSITIONS.get((life.state, event))
        if target is None:
            raise LedgerError(f"call {life.call.id}: cannot {event} a call that is {life.state}")
        if life.state == "running" and target != "running" and life.batch is not None:
            life.batch.running -= 1
        life.state = target

    def _end(self, lives: list[_Life], event: _Event, why: str, now: float) -> None:
        """Give each of ``lives`` its fate by ``event``."""
        fate, live, fates, history = _FATE_OF[event], self._live, self._fates, self._history
        # Look for ended lives to forget after each one only if these can pass the mark.
        prune = len(self._lives) - len(live) + len(lives) - history > history // 4
        for life in lives:
            self._move(life, event)
            call, outcome, received = life.call, life.outcome, life.received_at
            del live[call.id]
            fates.append(Fate(call.id, call.name, life.behavior, fate, why, outcome, received, now))
            if life.anonymous and event != "send":  # sent ones left the queue when released
                self._leave_queue(life)
            if prune:
                self._forget_old()
        self._untaken += len(lives)
        if event != "send":  # answers of theirs may be queued: ``drain`` drops them
            self._stale = True

    def _forget_old(self) -> None:
        """Drop the oldest ended lives beyond ``history`` (pending ones are always kept)."""
        excess = len(self._lives) - len(self._live) - self._history
        if excess <= self._history // 4:  # prune in batches: amortised O(1) per call
            return
        lives = self._lives  # oldest first: the scan stops at the last one it drops
        for call_id in list(
            itertools.islice(itertools.filterfalse(self._live.__contains__, lives), excess)
        ):
            del lives[call_id]

    def _release(self, lives: Iterable[_Life | None], batch: _Batch | None) -> None:
        """Queue the answers of ``lives`` settled in ``batch`` (not withdrawn, not re-issued),
        in call order; an anonymous call whose function has an earlier one waiting stays."""
        ready = self._ready
        names: set[str] | None = None
        for life in lives:
            if life is not None and life.batch is batch and life.state == "settled":
                if life.anonymous:
                    name = life.call.name
                    queue = self._unreleased[name]
                    if queue[0] is not life:
                        continue  # released when the earlier ones of its function are
                    queue.popleft()
                    if names is None:
                        names = set()
                    names.add(name)
                outcome = life.outcome
                assert outcome is not None  # a settled call has one
                life.state = _READY
                ready.append((life, outcome))
        if names is not None:
            for name in names:
                self._release_waiting(name)

    def _release_waiting(self, name: str) -> None:
        """Queue the anonymous calls of ``name`` that were waiting only for earlier ones: the
        service matches answers without ids by name and order."""
        queue = self._unreleased[name]
        while queue and queue[0].state == "settled":
            head = queue[0]
            if head.batch is not None and head.batch.running:
                break  # its batch still runs: the batch releases it
            queue.popleft()
            assert head.outcome is not None  # a settled call has one
            head.state = _READY
            self._ready.append((head, head.outcome))
        if not queue:
            del self._unreleased[name]

    def _leave_queue(self, life: _Life) -> None:
        """An anonymous call ended before its answer was queued: the next of its name may go."""
        name = life.call.name
        queue = self._unreleased.get(name)
        if queue is None or life not in queue:
            return
        queue.remove(life)
        self._release_waiting(name)

    def _requeue_in_flight(self) -> None:
        if self._in_flight is not None:
            self._ready[:0] = self._in_flight[1]
            self._in_flight = None

    def _note(self, kind: NoticeKind, life: _Life, detail: str) -> None:
        self._notices.append(Notice(kind, life.call.id, detail))


def _unit_of(life: _Life) -> _Batch | None:
    """The answers that share a frame with this one's: its batch, unless the batch is split."""
    batch = life.batch
    return None if batch is None or batch.split else batch


def _check(calls: Sequence[LiveCall]) -> None:
    """Raise for the first call ``receive`` cannot take (it then admits none)."""
    for live_call in calls:
        if not live_call.call.id:
            raise LedgerError("a call without an id cannot be answered; filter it out first")
        if live_call.streaming and live_call.behavior == "BLOCKING":
            raise LedgerError(f"call {live_call.call.id}: only NON_BLOCKING calls can stream")


def _never_received(call_id: str) -> NoReturn:
    raise LedgerError(f"call {call_id} was never received")
