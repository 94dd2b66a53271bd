"""The ledger's answer queue: which answers may go out now, in what grouping, in what frames.

A BLOCKING call is released when every call of its batch (the BLOCKING calls of one
``receive()``) has settled or been cancelled, so the whole batch goes out in one message.
A NON_BLOCKING call is released as soon as it settles; its streamed items go out as they come.
A call that came without an id (``LiveCall.anonymous``: Vertex AI) is answered by name, so two
such calls to one function are answered in the order they came: one waits, settled, until every
earlier one of that name is released or has ended.

Frames are bounded: one ``toolResponse`` never encodes to more than ``max_frame_bytes``, every
answer measured, errors and rejections too. The results of a BLOCKING batch, which go out
together, are cut to fit, fairly (the largest first, down to a common cap); a batch too large
for one frame even so (thousands of calls in one turn) is *split*: its answers go out whole, in
call order, over as many frames as they need. NON_BLOCKING answers that do not fit wait for the
next message.

``CallLedger`` owns one ``Delivery`` and decides the fates; this module only queues, groups and
measures, and changes a life's state only from ``settled`` to ``ready``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from livebridge.calls import frame_budget
from livebridge.calls.call import AnswerEncoder, Outcome
from livebridge.calls.lives import (
    LIVE_STATES,
    READY,
    Answered,
    BlockingBatch,
    Ended,
    Item,
    Life,
    Outgoing,
)
from livebridge.errors import LedgerError

ENVELOPE_BYTES = 64  # the message around the responses, with room to spare


class Delivery:
    """The answers released and not yet sent, and the one message in flight."""

    __slots__ = (
        "_backlog",
        "_encode",
        "_max_frame_bytes",
        "in_flight",
        "ready",
        "stale",
        "unreleased",
    )

    def __init__(self, encode: AnswerEncoder, max_frame_bytes: int) -> None:
        self._encode = encode
        self._max_frame_bytes = max_frame_bytes
        self.ready: list[Item] = []
        #: An answer queued may be of a call that ended since: ``drain`` filters.
        self.stale = False
        self._backlog = False  # the last drain left answers queued: drain goes unit by unit
        self.in_flight: tuple[Outgoing, list[Item]] | None = None  # drained, not yet sent()
        #: Anonymous lives not yet released nor ended, by function name, oldest first.
        self.unreleased: dict[str, deque[Life]] = {}

    def admit_anonymous(self, life: Life) -> None:
        """An anonymous call arrived: it is released after the earlier ones of its name."""
        self.unreleased.setdefault(life.name, deque()).append(life)

    def release(self, lives: Iterable[Life | Ended | None], batch: BlockingBatch | None) -> None:
        """Queue the answers of ``lives`` settled in ``batch`` (not withdrawn, not re-issued),
        in call order; an anonymous call whose function has an earlier one waiting stays."""
        ready = self.ready
        names: set[str] | None = None
        for life in lives:
            if type(life) is Life and life.batch is batch and life.state == "settled":
                if life.anonymous:
                    name = life.name
                    queue = self.unreleased[name]
                    if queue[0] is not life:
                        continue  # released when the earlier ones of its function are
                    queue.popleft()
                    if names is None:
                        names = set()
                    names.add(name)
                outcome = life.outcome
                assert outcome is not None  # a settled call has one
                life.state = READY
                ready.append((life, outcome))
        if names is not None:
            for name in names:
                self._release_waiting(name)

    def leave_queue(self, life: Life) -> None:
        """An anonymous call ended before its answer was queued: the next of its name may go."""
        name = life.name
        queue = self.unreleased.get(name)
        if queue is None or life not in queue:
            return
        queue.remove(life)
        self._release_waiting(name)

    def drain(self, now: float) -> Outgoing | None:
        """What is ready to send now, as one message within ``max_frame_bytes`` (None: nothing,
        or the previous message awaits ``sent()``). What did not fit stays queued."""
        if self.in_flight is not None or not self.ready:
            return None
        ready = self.ready
        if self.stale:  # drop the answers of calls cancelled or orphaned since they queued
            self.stale = False
            self.ready = ready = [item for item in ready if item[0].state in LIVE_STATES]
            if not ready:
                return None
        budget = self._max_frame_bytes - ENVELOPE_BYTES
        # Commonly all fits, measured in the one encode that is sent; if not (or not last
        # time): unit by unit, and the transport encodes what was taken.
        taken, encoded = ready, None
        if not self._backlog:
            responses = self._encoded(ready)
            encoded = frame_budget.encode(responses)
            if frame_budget.array_size(encoded) > budget:
                encoded = None
        if encoded is None:
            taken, responses, split = frame_budget.take(ready, _unit_of, self._encoded, budget)
            if split:  # the rest of its batch follows, answer by answer, in the next frames
                batch = taken[-1][0].batch
                assert batch is not None  # only a batch is a unit of several answers
                batch.split = True
            for life, answer in taken:
                if isinstance(answer, Outcome):  # cut to fit, it is the answer sent
                    life.outcome = answer
        self.ready = ready[len(taken) :]
        self._backlog = bool(self.ready)
        answered = [
            Answered(
                life.call_id,
                life.name,
                life.behavior,
                answer if isinstance(answer, Outcome) else None,
                now - life.received_at,
            )
            for life, answer in taken
        ]
        outgoing = Outgoing(responses, answered, encoded)
        self.in_flight = (outgoing, taken)
        return outgoing

    def sent(self, outgoing: Outgoing) -> list[Life]:
        """``outgoing`` left: the lives it answers with a final answer (still ``ready``)."""
        in_flight = self.in_flight
        if in_flight is None or in_flight[0] is not outgoing:
            raise LedgerError("sent() must confirm the message drain() returned last")
        self.in_flight = None
        return [
            life
            for life, answer in in_flight[1]
            if life.state == "ready" and isinstance(answer, Outcome)
        ]

    def requeue_in_flight(self) -> None:
        """The message in flight did not leave: it goes back to the front of the queue."""
        if self.in_flight is not None:
            self.ready[:0] = self.in_flight[1]
            self.in_flight = None

    def _encoded(self, items: Sequence[Item]) -> list[dict[str, Any]]:
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

    def _release_waiting(self, name: str) -> None:
        """Queue the anonymous calls of ``name`` that were waiting only for earlier ones: the
        service matches answers without ids by name and order."""
        queue = self.unreleased[name]
        while queue and queue[0].state == "settled":
            head = queue[0]
            if head.batch is not None and head.batch.running:
                break  # its batch still runs: the batch releases it
            queue.popleft()
            assert head.outcome is not None  # a settled call has one
            head.state = READY
            self.ready.append((head, head.outcome))
        if not queue:
            del self.unreleased[name]


def _unit_of(life: Life) -> BlockingBatch | None:
    """The answers that share a frame with this one's: its batch, unless the batch is split."""
    batch = life.batch
    return None if batch is None or batch.split else batch
