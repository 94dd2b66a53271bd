"""The client's side of the tool-call contract, checked message by message (no I/O).

The server side issues, cancels and withdraws calls; every ``toolResponse`` is fed in and checked,
and the connection's end is reported with how it ended. Each breach becomes a ``Violation``
carrying the offending message. A call moves only through the contract's table
(``livebridge.emulator.contract``: ``TRANSITIONS``, ``move``), which the OpenAI checker shares.

Calls issued without ids (Vertex AI, ``nameless``) are known by a key of the checker's own, and
an answer without an id is matched by name to the oldest open one of that function, as the
service matches them.
"""

from __future__ import annotations

import copy
import itertools
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from livebridge.emulator.contract import (
    TRANSITIONS,
    Answer,
    CallChecker,
    CallEvent,
    CallRecord,
    Ending,
    Severity,
    Thresholds,
    Violation,
    move,
)
from livebridge.errors import LocalProtocolError
from livebridge.vendors.gemini import wire

#: Every kind of violation the checker reports, with its severity. An error breaks the contract
#: (the model stalls, or gets an answer it cannot use); a warning costs time or fidelity.
SEVERITIES: dict[str, Severity] = {
    "unknown_id": "error",
    "cancelled_id": "error",
    "duplicate_answer": "error",
    "missing_id": "error",
    "missing_name": "error",
    "name_mismatch": "error",
    "scheduling_on_blocking": "warning",
    "will_continue_on_blocking": "error",
    "split_batch": "warning",
    "serial_answers": "warning",
    "held_answers": "warning",
    "opaque_error": "warning",
    "unanswered": "error",
    "client_crash": "error",
    "audio_during_blocking": "warning",
    "malformed_message": "error",
    "frame_too_large": "error",
    "deprecated_media_chunks": "warning",
    "undeclared_behavior": "warning",
    "unsupported_behavior": "error",
    "unsupported_field": "error",
}
VIOLATION_KINDS = tuple(SEVERITIES)

#: Seconds after the client was seen to read a ``toolCall`` (its pong to the ping sent right
#: behind it) during which its audio is taken to have been in flight: the app had not yet seen
#: the call. Measured from the pong, so a loaded client is not blamed for its own lag.
AUDIO_IN_FLIGHT = 0.25

# A payload that reads like a failure: "… failed and returned no result.", "Error: …".
_FAILURE_TEXT = re.compile(
    r"\b(fail(ed|s|ure)?|errors?|exception|traceback|could ?n[o']t|unable to|timed? ?out)\b",
    re.IGNORECASE,
)


@dataclass(slots=True)
class _Batch:
    """One ``toolCall``: when it went out and when each message answering it came back."""

    issued_at: float
    ids: list[str]
    answer_times: list[tuple[float, int]] = field(default_factory=list)  # (time, answers)
    flagged: set[str] = field(default_factory=set)


class Checker(CallChecker):
    """Tracks the calls of one connection and reports the client's violations to ``sink``."""

    SEVERITIES = SEVERITIES
    SERVER_CLOSED = " before the server closed"
    CROSSED = ": it crossed the client's close"

    def __init__(
        self,
        session: str,
        sink: Callable[[Violation], None],
        *,
        check_audio_during_blocking: bool = True,
        thresholds: Thresholds | None = None,
        known: dict[str, CallRecord] | None = None,
        clock: Callable[[], float] = time.monotonic,
        call_ids: bool = True,
    ) -> None:
        super().__init__(session, sink, thresholds=thresholds, clock=clock)
        #: The service sends ids with its calls (else an answer without one is matched by name).
        self.call_ids = call_ids
        self.check_audio_during_blocking = check_audio_during_blocking
        self.calls = copy.deepcopy(known) if known else {}
        self._batches: dict[int, _Batch] = {}
        self._audio_flagged: set[int] = set()
        self._nameless = itertools.count(1)

    # server side -------------------------------------------------------------------------------

    def nameless_key(self) -> str:
        """A key for a call issued without an id (never sent)."""
        while True:
            key = f"nameless-{next(self._nameless)}"
            if key not in self.calls:
                return key

    def issue(
        self,
        calls: list[tuple[str, str, dict[str, Any], bool]],
        reissue_of: str | None = None,
        *,
        nameless: bool = False,
    ) -> int:
        """Register one ``toolCall``'s calls (id, name, args, blocking); returns its batch.

        ``nameless``: the calls go out without ids; the ids given are the checker's own keys."""
        batch = len(self._batches) + 1
        now = self.clock()
        self._batches[batch] = _Batch(now, [call[0] for call in calls])
        for call_id, name, args, blocking in calls:
            if call_id in self.calls:
                raise LocalProtocolError(f"call id {call_id} was issued before; ids are unique")
            self.calls[call_id] = CallRecord(
                call_id,
                name,
                args,
                blocking,
                batch,
                reissue_of=reissue_of,
                issued_at=now,
                nameless=nameless,
            )
        return batch

    def read(self, batch: int) -> None:
        """The client has read ``toolCall`` ``batch`` (it answered the ping sent behind it)."""
        now = self.clock()
        for call_id in self._batches[batch].ids:
            record = self.calls[call_id]
            if record.read_at is None:
                record.read_at = now

    def cancel(self, ids: list[str]) -> None:
        """``toolCallCancellation``: the client must not answer these any more."""
        self._move_open(ids, "cancel")

    def cancellation_read(self, ids: list[str]) -> None:
        """The client has read the cancellation of ``ids`` (it answered the ping behind it):
        an answer after this is an error; one before may have crossed it in flight."""
        for record in filter(None, map(self.calls.get, ids)):
            record.cancel_read = True

    def withdraw(self, ids: list[str]) -> None:
        """The service dropped these calls without a cancellation (an interrupted turn)."""
        self._move_open(ids, "withdraw")

    def resolved_answer(self, call_id: str) -> Answer | None:
        """The answer that settled ``call_id`` (its own, or that of a re-issue of it)."""
        record = self.calls[call_id]
        if record.state == "answered":
            return record.answer
        root = record.reissue_of or record.id
        for other in self.calls.values():
            if other.state == "answered" and (other.id == root or other.reissue_of == root):
                return other.answer
        return None

    def blocking_pending(self) -> list[CallRecord]:
        return [record for record in self.calls.values() if record.open and record.blocking]

    # client side -------------------------------------------------------------------------------

    def on_tool_response(
        self, message: dict[str, Any], responses: list[wire.FunctionResponse]
    ) -> list[tuple[CallRecord, wire.FunctionResponse]]:
        """Check one ``toolResponse``; returns the answers accepted (record, response)."""
        now = self.clock()
        accepted: list[tuple[CallRecord, wire.FunctionResponse]] = []
        taken: set[str] = set()  # nameless calls this message answered already
        for response in responses:
            record = self._admit(message, response, taken)
            self._check_payload(message, response)  # whether or not the answer is admitted
            if record is None:
                continue
            self._check_fields(message, record, response)
            self._record(record, response)
            accepted.append((record, response))
        answered: dict[int, int] = {}
        for record, _ in accepted:
            if record.blocking:
                answered[record.batch] = answered.get(record.batch, 0) + 1
        for batch, count in answered.items():
            self._check_timing(message, batch, now, count)
        return accepted

    def on_audio(self, message: dict[str, Any]) -> None:
        """Audio streamed while a blocking call is pending (flagged once per batch).

        Audio arriving before the client read the ``toolCall``, or within ``AUDIO_IN_FLIGHT``
        after, was on its way before the app could have seen the call: not held against it.
        """
        if not self.check_audio_during_blocking:
            return
        known_since = self.clock() - AUDIO_IN_FLIGHT
        pending = self.blocking_pending()
        seen = {r.batch for r in pending if r.read_at is not None and r.read_at <= known_since}
        batches = seen - self._audio_flagged
        if batches:
            self._audio_flagged |= batches
            self.flag(
                "audio_during_blocking", "audio streamed while a blocking call is pending", message
            )

    # internals ---------------------------------------------------------------------------------

    def _admit(
        self, message: dict[str, Any], response: wire.FunctionResponse, taken: set[str]
    ) -> CallRecord | None:
        """The record ``response`` answers, or None when it cannot be accepted at all."""
        if not response.name:
            self.flag("missing_name", f"function response {response.id} has no name", message)
        if not response.id:
            if self.call_ids:
                self.flag("missing_id", "function response without an id", message)
                return None
            return self._by_name(message, response, taken)
        record = self.calls.get(response.id)
        if record is None:
            self.flag("unknown_id", f"answer for unknown call id {response.id}", message)
        elif record.state == "cancelled" and record.cancel_read:
            self.flag("cancelled_id", f"answer for cancelled call {response.id}", message)
        elif record.state == "cancelled":
            text = f"answer for cancelled call {response.id}: it may have crossed the cancellation"
            self.flag("cancelled_id", text, message, "warning")
        elif record.state == "answered":
            self.flag("duplicate_answer", f"second answer for call {response.id}", message)
        else:
            return record
        return None

    def _by_name(
        self, message: dict[str, Any], response: wire.FunctionResponse, taken: set[str]
    ) -> CallRecord | None:
        """The oldest open nameless call of the answer's function (this message's earlier
        answers took theirs): how the service matches answers without ids."""
        for record in self.calls.values():
            open_call = record.nameless and record.open and record.name == response.name
            if open_call and record.id not in taken:
                taken.add(record.id)
                return record
        self.flag(
            "unknown_id",
            f"answer for {response.name!r} without an id, but no call to it is open",
            message,
        )
        return None

    def _check_fields(
        self, message: dict[str, Any], record: CallRecord, response: wire.FunctionResponse
    ) -> None:
        if response.name and response.name != record.name:
            text = f"call {response.id} is {record.name!r}, answered as {response.name!r}"
            self.flag("name_mismatch", text, message)
        if record.blocking and response.scheduling is not None:
            text = f"scheduling {response.scheduling} on blocking call {response.id} (ignored)"
            self.flag("scheduling_on_blocking", text, message)
        if record.blocking and response.will_continue is not None:
            self.flag(
                "will_continue_on_blocking",
                f"will_continue on blocking call {response.id}",
                message,
            )

    def _check_payload(self, message: dict[str, Any], response: wire.FunctionResponse) -> None:
        """A failure answered as text (Pipecat's ``{"value": "The function … failed and
        returned no result."}``) is opaque, whatever else is wrong with the answer."""
        if _is_opaque_error(response.response):
            call = response.id or repr(response.name)
            self.flag(
                "opaque_error",
                f"call {call} failed with an unstructured payload; answer failures as "
                '{"error": {"type": ..., "message": ...}} so the model can tell them from results',
                message,
            )

    def _check_timing(self, message: dict[str, Any], number: int, now: float, count: int) -> None:
        """The timing checks of one blocking batch, run as each message answering it arrives."""
        batch = self._batches[number]
        batch.answer_times.append((now, count))
        blocking = [self.calls[i] for i in batch.ids if self.calls[i].blocking]
        what = f"blocking answers of batch {number}"
        self.check_held(message, batch.flagged, now - batch.issued_at, what, "the toolCall")
        if len(batch.answer_times) == 2:
            self.flag(
                "split_batch",
                f"blocking calls of one toolCall (batch {number}) answered in several messages",
                message,
            )
        if any(record.open for record in blocking) or len(blocking) < 2:
            return
        times = [batch.issued_at] + [at for at, _ in batch.answer_times]
        if all(n == 1 for _, n in batch.answer_times) and len(times) >= 3:
            self.check_serial(
                message,
                times,
                f"the {len(blocking)} calls of batch {number}",
                "run them concurrently and answer them in one message",
            )

    def finish(self, ending: Ending) -> None:
        """The connection ended: a batch some of whose BLOCKING calls were answered one per
        message, one after another, and the rest never, was answered serially all the same
        (a loop awaiting each call that stopped, or crashed, midway); then the open calls."""
        for number, batch in self._batches.items():
            blocking = [self.calls[i] for i in batch.ids if self.calls[i].blocking]
            singles = all(n == 1 for _, n in batch.answer_times)
            if len(batch.answer_times) >= 2 and singles and any(r.open for r in blocking):
                self.check_serial(
                    None,
                    [batch.issued_at] + [at for at, _ in batch.answer_times],
                    f"the first {len(batch.answer_times)} of the {len(blocking)} calls of "
                    f"batch {number}",
                    "run them concurrently and answer them in one message",
                )
        super().finish(ending)

    def _record(self, record: CallRecord, response: wire.FunctionResponse) -> None:
        if record.answer is None:
            record.answer = Answer(record.id, response.name, response.response)
        answer = record.answer
        answer.response = response.response
        answer.scheduling = response.scheduling
        answer.will_continue = response.will_continue
        answer.parts.append(wire.to_builtins(response))
        move(record, "stream" if response.will_continue else "answer")
        if record.state == "answered":
            self._supersede(record)

    def _supersede(self, record: CallRecord) -> None:
        """A re-issued call and its original are one question: one answer settles both."""
        related = {record.id, record.reissue_of} - {None}
        for other in self.calls.values():
            linked = other.id in related or other.reissue_of in related
            if other is not record and linked and (other.state, "supersede") in TRANSITIONS:
                move(other, "supersede")

    def _move_open(self, ids: list[str], event: CallEvent) -> None:
        for record in filter(None, map(self.calls.get, ids)):
            if record.open:
                move(record, event)


def _is_opaque_error(response: dict[str, Any] | None) -> bool:
    """A failure answered as text: ``{"error": "…"}``, or a payload that reads like one."""
    if not response:
        return False
    if "error" in response:
        return not isinstance(response["error"], dict)
    if "output" in response:
        return False  # a result, whatever it says
    texts = [value for value in response.values() if isinstance(value, str)]
    return any(_FAILURE_TEXT.search(text) for text in texts)
