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
When a settled call is released (its whole BLOCKING batch at once, a NON_BLOCKING call at
once, a call without an id after the earlier ones of its name) and how answers are cut into
frames of at most ``max_frame_bytes`` is the answer queue's part (``livebridge.calls.delivery``).

Identity rules:
- an id that is still live is never run twice: a second delivery is dropped;
- after a life ends, the first copy from the *other* source (``modelTurn`` vs ``toolCall``) on
  the same connection is the twin of the same delivery and is dropped too (while the life is
  among the newest ``FATES_KEPT`` fates, or may still change: a twin comes right after);
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

The records and the state table live in ``livebridge.calls.lives``; they are re-exported here.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from typing import Literal, NoReturn

from livebridge.calls import payloads
from livebridge.calls.call import AnswerEncoder, Call, Outcome, Partial
from livebridge.calls.delivery import Delivery
from livebridge.calls.endings import OUTCOME_KINDS
from livebridge.calls.lives import (
    ANSWERED,
    FINAL,
    LIVE_STATES,
    SETTLED,
    TRANSITIONS,
    BlockingBatch,
    CallState,
    Ended,
    Fate,
    Life,
    LiveCall,
    Move,
    Notice,
    NoticeKind,
    Outgoing,
    Via,
    move,
)
from livebridge.errors import LedgerError

_MAX_HANDLES = 16
#: The newest fates kept in full for ``fates()`` (and every one not taken yet, up to
#: ``history``); older ids are judged by ``FINAL`` records once nothing can change them.
FATES_KEPT = 256
_NAMES_SHARED = 256
_KINDS = frozenset(OUTCOME_KINDS)
_VIAS: dict[Via, tuple[Via, ...]] = {"tool_call": ("tool_call",), "model_turn": ("model_turn",)}
DEFAULT_MAX_FRAME_BYTES = payloads.DEFAULT_MAX_FRAME_BYTES
#: The history of a ledger no call has ended in yet: an empty deque is 760 bytes on 3.11.
_NO_FATES: deque[Ended] = deque(maxlen=0)


class CallLedger:
    """Tracks every call of one Live session; see the module docstring for the rules."""

    def __init__(
        self,
        history: int = 4096,
        *,
        encode: AnswerEncoder,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        """``history``: how many ended calls are remembered, so that a long session's memory
        stays bounded; re-issues are recognised within it (the newest ``FATES_KEPT`` in full,
        as ``fates()`` reports them; older ones by their fate alone, ``lives.FINAL``).
        ``encode`` builds each answer's wire dict; no message drained is larger than
        ``max_frame_bytes`` once encoded."""
        if history < 1:
            raise ValueError("history must be at least 1")
        if max_frame_bytes < 1024:
            raise ValueError("max_frame_bytes must be at least 1024")
        self._history = history
        self._kept_in_full = min(history, FATES_KEPT)
        self._delivery = Delivery(encode, max_frame_bytes)
        #: Messages of answers sent on this connection, not yet known to be read: (send
        #: number, the records of the calls it answered), one entry per message.
        self._unacknowledged: list[tuple[int, list[Ended]]] = []
        self._sends = 0  # messages of answers sent so far, on every connection
        #: The shell proves reads with ``read_through()``: a server message alone proves none.
        self.reads_proven = False
        #: The newest delivery of each id: its life, or the record it left once it ended.
        self._lives: dict[str, Life | Ended] = {}
        self._live: dict[str, Life] = {}  # lives without a fate yet, in arrival order
        self._fates: deque[Ended] = _NO_FATES  # the newest, in the order they ended
        #: Fates not yet returned by ``take_fates()`` (at most ``history``), answers sent aside:
        #: each of those is reported by the message that carried it (``Outgoing.answered``).
        self._untaken: list[Ended] = []
        self._names: dict[str, str] = {}  # one copy of each tool name (the first few)
        self._notices: list[Notice] = []
        #: Fates (but answers sent) and notices not taken yet: a reporter with nothing to take
        #: skips its look. An attribute kept up to date, not a property: it is read after
        #: every event.
        self.waiting = 0
        #: Answers wait for ``drain()`` (some may be of calls that ended meanwhile). Kept up
        #: to date by every event that queues or takes answers: it too is read after each.
        self.answers_ready = False
        self._seq = 0  # deliveries admitted so far; a handle knows those below its mark
        self._epoch = 0  # connections opened so far; twins are matched within one
        self._handles: OrderedDict[str, int] = OrderedDict()  # handle -> mark, newest last
        self._connected = True

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
        """The last fates (``FATES_KEPT``, or ``history`` if fewer), in the order they happened."""
        return _fates_of(self._fates)

    def take_fates(self) -> list[Fate]:
        """The fates that happened since the last call, but answers sent: an ``answered`` fate
        is reported by the ``Outgoing`` that carried the answer (its ``answered``), so a
        session's every turn makes no records that nothing reads (``fates()`` has them all).
        """
        untaken = self._untaken
        if not untaken:
            return []
        self._untaken = []
        self.waiting = len(self._notices)
        return _fates_of(untaken)

    def take_notices(self) -> list[Notice]:
        """The notices since the last call."""
        notices, self._notices = self._notices, []
        self.waiting = len(self._untaken)
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
        _check(calls)
        lives, live, names = self._lives, self._live, self._names
        seq, epoch, vias = self._seq, self._epoch, _VIAS[via]
        ids: list[str] = []
        batch = BlockingBatch(ids, 0)  # the BLOCKING calls admitted (unused if there are none)
        dropped: set[str] = set()  # ids dropped from this message so far
        admitted: list[Call] = []
        for live_call in calls:
            call = live_call.call
            call_id = call.id
            previous = lives.get(call_id)
            if previous is not None and self._drops(call_id, previous, via, self._seq, dropped):
                continue
            behavior, name = live_call.behavior, call.name
            if type(name) is str:  # one copy of each name, not one per remembered call
                name = names.get(name) or self._share(name)
            if behavior == "BLOCKING":  # validated above: it does not stream
                life = Life(call_id, name, behavior, None, False, now, seq, epoch, vias, batch)
                ids.append(call_id)
            else:
                scheduling, streaming = live_call.scheduling, live_call.streaming
                life = Life(call_id, name, behavior, scheduling, streaming, now, seq, epoch, vias)
            if live_call.anonymous:
                life.anonymous = True
                self._delivery.admit_anonymous(life)
            seq += 1
            lives[call_id] = life
            live[call_id] = life
            admitted.append(call)
        self._seq = seq
        batch.running = len(ids)
        return admitted

    def partial(self, item: Partial) -> None:
        """A streaming handler yielded ``item``; it goes out with ``willContinue: true``."""
        call_id = item.call_id
        life = self._lives.get(call_id) or _never_received(call_id)
        if isinstance(life, Ended):  # withdrawn meanwhile (or an illegal move: it raises)
            _ended_move(call_id, life, "partial")
            self._note("dropped_result", call_id, f"item for a {life.state} call dropped")
            return
        if life.state == "running" and not life.streaming:
            raise LedgerError(f"call {call_id}: {life.name} is not a streaming tool")
        move(life, "partial")  # a live call streams only while running: else this raises
        self._delivery.ready.append((life, item))
        self.answers_ready = True

    def settle(self, outcome: Outcome) -> None:
        """A call's final outcome, from the dispatcher.

        An outcome of kind ``cancelled`` for a call the server did not cancel (a handler
        cancelled at shutdown) is an answer like any other: its error payload is sent.
        """
        life = self._lives.get(outcome.call_id)
        if type(life) is not Life or life.outcome is not None or outcome.kind not in _KINDS:
            self._settle_otherwise(life, outcome)  # it raises, or the result is dropped
            return
        life.state = SETTLED
        life.outcome = outcome
        batch = life.batch
        if batch is None:
            self._delivery.release((life,), None)
            self.answers_ready = bool(self._delivery.ready)
            return
        batch.running -= 1  # as ``move`` does for a call leaving running
        if not batch.running:
            self._delivery.release(map(self._lives.get, batch.ids), batch)
            self.answers_ready = bool(self._delivery.ready)

    def _settle_otherwise(self, life: Life | Ended | None, outcome: Outcome) -> None:
        """An outcome that is not the first of a live call: refused, or dropped (noted)."""
        if life is None:
            _never_received(outcome.call_id)
        if life.settled if isinstance(life, Ended) else life.outcome is not None:
            raise LedgerError(f"call {outcome.call_id} settled twice")
        if outcome.kind not in _KINDS:
            raise LedgerError(
                f"call {outcome.call_id}: {outcome.kind!r} is not an outcome kind"
                " (only the ledger gives a call its fate)"
            )
        assert isinstance(life, Ended)  # withdrawn meanwhile (or an illegal move: it raises)
        _ended_move(outcome.call_id, life, "settle")
        life.settled = True  # nothing of its result is kept (``FINAL`` ones are settled)
        self._note("dropped_result", outcome.call_id, f"result for a {life.state} call dropped")

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
                self._note("unknown_cancel", call_id, "cancel for unknown id")
                continue
            if isinstance(life, Ended):
                self._note("late_cancel", call_id, f"cancel for a call already {life.state}")
                continue
            if life.state == "running":
                running.append(call_id)
            batch = life.batch
            self._end([life], "cancel", why, now)
            if batch is not None and not batch.running:  # the rest of its batch may go now
                self._delivery.release(map(self._lives.get, batch.ids), batch)
        self.answers_ready = bool(self._delivery.ready)
        return running

    def unrun(
        self, calls: Sequence[LiveCall], now: float, why: str, by: Literal["cancel", "orphan"]
    ) -> list[str]:
        """Calls that end before they could run (the service never finished asking for them):
        received and given their fate ``by`` that move at once; returns their ids. Their fates
        are reported as every other (``take_fates``): no vendor reports a fate of its own."""
        admitted = self.receive(calls, now)
        live = self._live
        self._end([live[call.id] for call in admitted], by, why, now)
        return [call.id for call in admitted]

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
            for _, records in self._unacknowledged:
                for life in records:
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
            for sent, records in unacknowledged:
                if sent <= number:
                    for life in records:
                        life.acknowledged = True
            self._unacknowledged = [item for item in unacknowledged if item[0] > number]

    def disconnected(self) -> None:
        """No socket is open: answers wait for ``resumed()``.

        A message drained but not confirmed by ``sent()`` did not leave: it goes back to the
        front of the queue.
        """
        self._connected = False
        self._unacknowledged = []  # the connection ended before anything confirmed them
        self._delivery.requeue_in_flight()
        self.answers_ready = bool(self._delivery.ready)

    def resumed(self, handle: str | None, now: float) -> list[str]:
        """A socket opened with ``handle`` (None: a fresh session); returns the orphaned ids.

        Every call the handle does not know is orphaned: its answer will never be sent, and a
        result that arrives later is dropped. The shell may cancel those still running.
        """
        mark = None if handle is None else self._handles.get(handle)
        reason = "fresh session" if handle is None else "not known to the resumed session"
        unknown = [life for life in self._live.values() if mark is None or life.seq >= mark]
        self._end(unknown, "orphan", reason, now)
        orphaned = [life.call_id for life in unknown]
        if handle is None:
            self._handles.clear()
        self._delivery.requeue_in_flight()
        self.answers_ready = bool(self._delivery.ready)
        self._unacknowledged = []
        self._epoch += 1
        self._connected = True
        return orphaned

    def shutdown(self) -> list[str]:
        """The app is leaving: the ids still running (cancel them after the grace).

        Results that settle later are still answered while a socket is open.
        """
        return [life.call_id for life in self._live.values() if life.state == "running"]

    def close(self, now: float) -> list[str]:
        """The session is over: every call without a fate is orphaned; returns their ids.

        Closing twice is harmless. Results that arrive later are dropped.
        """
        self._connected = False
        self._delivery.in_flight = None
        orphaned = list(self._live)
        self._end(list(self._live.values()), "orphan", "session closed", now)
        return orphaned

    def drain(self, now: float) -> Outgoing | None:
        """What is ready to send now, as one ``toolResponse`` within ``max_frame_bytes``.

        None when nothing is ready, no socket is open, or the previous message awaits
        ``sent()``: one message is in flight at a time. What did not fit stays queued.
        """
        if not self._connected:
            return None
        outgoing = self._delivery.drain(now)
        self.answers_ready = bool(self._delivery.ready)
        return outgoing

    def sent(self, outgoing: Outgoing, now: float) -> None:
        """The message from ``drain()`` left on the socket: its final answers are answered.

        A call cancelled or orphaned while its answer was being written keeps that fate.
        If the socket closes first, ``disconnected()`` puts the message back in the queue.
        """
        ended = self._end(self._delivery.sent(outgoing), "send", "sent", now)
        self._sends += 1
        number = self._sends
        if ended:
            self._unacknowledged.append((number, ended))

    # -- internals ------------------------------------------------------------------------

    def _drops(
        self, call_id: str, previous: Life | Ended, via: Via, start: int, dropped: set[str]
    ) -> bool:
        """Whether a delivery of an id already known is dropped (noted): repeated in this
        message (admitted at or after ``start``, or in ``dropped``), still live, or a twin."""
        if previous.seq >= start or call_id in dropped:
            self._note("duplicate_delivery", call_id, "id repeated in one message")
            return True
        live = previous.state in LIVE_STATES
        twin = previous.epoch == self._epoch and via not in previous.via
        if not (live or twin):
            return False  # a re-issue: a new life
        if via not in previous.via:
            previous.via = (*previous.via, via)
        self._note("duplicate_delivery", call_id, f"second delivery via {via} dropped")
        dropped.add(call_id)
        return True

    def _end(self, lives: list[Life], event: Move, why: str, now: float) -> list[Ended]:
        """Give each of ``lives`` its fate by ``event``; returns the records they leave in the
        history in their place (their fate's fields; no arguments, no payload)."""
        live, by_id, fates, history = self._live, self._lives, self._fates, self._history
        if fates is _NO_FATES and lives:  # (every connection opens with an empty orphaning)
            fates = self._fates = deque()
        # Look for ended lives to forget after each one only if these can pass the mark.
        prune = len(by_id) - len(live) + len(lives) - history > history // 4
        sent = event == "send"
        records = []
        for life in lives:
            if sent:  # ``move``, inline: ``Delivery.sent`` hands out only ready lives
                life.state = ANSWERED
            else:
                move(life, event)
            call_id, outcome = life.call_id, life.outcome
            del live[call_id]
            latency = outcome.latency if outcome is not None and not sent else 0.0
            record = Ended(
                call_id,
                life.name,
                life.behavior,
                life.state,
                why,
                latency,
                life.received_at,
                now,
                life.epoch,
                life.via,
                outcome is not None,
            )
            by_id[call_id] = record  # a live id is its newest delivery: it keeps its place
            records.append(record)
            if life.anonymous and not sent:  # sent ones left the queue when released
                self._delivery.leave_queue(life)
            if prune:
                self._forget_old()
        fates.extend(records)
        if len(fates) > self._kept_in_full:
            self._let_go_of_old_fates()
        if not sent:  # reported by take_fates(); answers of theirs may be queued: drain drops them
            untaken = self._untaken
            untaken.extend(records)
            if len(untaken) > history:  # never taken: the oldest are let go
                del untaken[: len(untaken) - history]
            self.waiting = len(untaken) + len(self._notices)
            self._delivery.stale = True
            self.answers_ready = bool(self._delivery.ready)
        return records

    def _let_go_of_old_fates(self) -> None:
        """Past the newest fates, a record leaves the history (one not taken yet stays in
        ``_untaken``); if nothing can change it any more, its id is judged by the shared
        ``FINAL`` record of its fate from now on, and the record itself is let go."""
        fates, by_id, keep = self._fates, self._lives, self._kept_in_full
        while len(fates) > keep:
            record = fates.popleft()
            call_id = record.call_id
            # ``record.final``, inline: this runs for every call
            final = record.settled and (record.acknowledged or record.state != "answered")
            if final and by_id.get(call_id) is record:
                by_id[call_id] = FINAL[record.state]

    def _share(self, name: str) -> str:
        """The copy of ``name`` the records share: names of tools are few; any others, from
        a model that makes them up, are not kept beyond ``_NAMES_SHARED``."""
        if len(self._names) < _NAMES_SHARED:
            self._names[name] = name
        return name

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

    def _note(self, kind: NoticeKind, call_id: str, detail: str) -> None:
        self._notices.append(Notice(kind, call_id, detail))
        self.waiting += 1


def _fates_of(records: Iterable[Ended]) -> list[Fate]:
    """Each record's ``Fate`` (``Ended.fate``, inline: one per call reported)."""
    return [
        Fate(
            r.call_id,
            r.name,
            r.behavior,
            r.state,  # type: ignore[arg-type]  # an ended record's state is its fate
            r.reason,
            r.latency,
            r.received_at,
            r.ended_at,
        )
        for r in records
    ]


def _check(calls: Sequence[LiveCall]) -> None:
    """Raise for the first call ``receive`` cannot take (it then admits none)."""
    for live_call in calls:
        if not live_call.call.id:
            raise LedgerError("a call without an id cannot be answered; filter it out first")
        if live_call.streaming and live_call.behavior == "BLOCKING":
            raise LedgerError(f"call {live_call.call.id}: only NON_BLOCKING calls can stream")


def _ended_move(call_id: str, record: Ended, event: Move) -> None:
    """``event`` for a delivery that ended: its fate stays; raise if the table has no such move."""
    if (record.state, event) not in TRANSITIONS:
        raise LedgerError(f"call {call_id}: cannot {event} a call that is {record.state}")


def _never_received(call_id: str) -> NoReturn:
    raise LedgerError(f"call {call_id} was never received")
