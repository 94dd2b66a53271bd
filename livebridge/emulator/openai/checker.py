"""The client's side of the OpenAI Realtime tool-call contract, checked event by event (no I/O).

A response's ``function_call`` items are one batch. The client owes each call exactly one
``function_call_output`` (none for a call of a response that ended ``cancelled`` or
``incomplete``), then exactly one continuation once every output of the batch is in (OpenAI's
realtime function-calling guide): a ``response.create``, or nothing when a response the server
started by itself after the last output already answers them. A response that began before every
output was in (a ``response.create`` sent early, user speech detected while the calls ran) has
not seen them all and continues nothing: the batch still owes its continuation. A refused
``response.create`` (a response is in progress) changed nothing and counts for nothing, and an
out-of-band one (``response.conversation: "none"``) writes to no conversation: neither is a
continuation. Calls move through the contract's table (``livebridge.emulator.contract``), so a
call's life reads the same on both vendors; the timing checks' bounds (``Thresholds``) are
shared.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from livebridge.emulator.contract import (
    Answer,
    CallChecker,
    CallRecord,
    Ending,
    Severity,
    Thresholds,
    Violation,
    move,
)
from livebridge.errors import LocalProtocolError

ResponseStatus = Literal["in_progress", "completed", "cancelled", "incomplete", "failed"]
#: What a response that starts is for: ``continuation`` (the scenario speaks the results),
#: ``early`` (a continuation before every output was in: answered at once with what there is),
#: ``turn`` (new user input, for the scenario), ``nothing`` (nothing new to answer: answered at
#: once), ``refused`` (a response is in progress: none starts), ``out_of_band``.
ResponseKind = Literal["continuation", "early", "turn", "nothing", "refused", "out_of_band"]

#: Every kind of violation this checker reports, with its severity.
REALTIME_SEVERITIES: dict[str, Severity] = {
    "unknown_call_id": "error",
    "duplicate_answer": "error",
    "answered_cancelled_call": "error",
    "unanswered_call": "error",
    "early_response_create": "error",
    "extra_response_create": "error",
    "missing_response_create": "error",
    "serial_answers": "warning",
    "held_answers": "warning",
    "invalid_event": "error",
    "client_crash": "error",
}


@dataclass(slots=True)
class _Batch:
    """The calls of one response and what the client did after them."""

    response_id: str
    number: int
    ids: list[str] = field(default_factory=list)
    status: ResponseStatus = "in_progress"
    done_at: float = 0.0  # when its response.done went out: the calls may run from then
    answer_times: list[float] = field(default_factory=list)
    creates: int = 0  # the client's response.create counted against this batch
    auto_started: bool = False  # a response the server started saw every output
    outputs_read: bool = False  # every output was in and the client then answered a ping
    flagged: set[str] = field(default_factory=set)  # timing checks already reported

    @property
    def continued(self) -> bool:
        return self.creates > 0 or self.auto_started


def answer_payload(output: str) -> dict[str, Any]:
    """What an output says, as a payload: its JSON object, else ``{"output": value}``."""
    try:
        value = json.loads(output)
    except ValueError:
        return {"output": output}
    return value if isinstance(value, dict) else {"output": value}


class RealtimeChecker(CallChecker):
    """Tracks the calls of one connection and reports the client's violations to ``sink``."""

    SEVERITIES = REALTIME_SEVERITIES
    UNANSWERED = "unanswered_call"
    CROSSED = ": its response.done crossed the client's close"

    def __init__(
        self,
        session: str,
        sink: Callable[[Violation], None],
        *,
        thresholds: Thresholds | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(session, sink, thresholds=thresholds, clock=clock)
        self._batches: dict[str, _Batch] = {}

    # server side -------------------------------------------------------------------------------

    def issue(self, response_id: str, calls: list[tuple[str, str, dict[str, Any]]]) -> None:
        """Register calls (call id, name, args) as items of response ``response_id``; an id
        issued before raises and changes nothing."""
        ids = [call[0] for call in calls]
        for call_id in ids:
            if call_id in self.calls or ids.count(call_id) > 1:
                raise LocalProtocolError(f"call id {call_id} was issued before; ids are unique")
        batch = self._batches.get(response_id)
        if batch is None:
            batch = self._batches[response_id] = _Batch(response_id, len(self._batches) + 1)
        now = self.clock()
        for call_id, name, args in calls:
            self.calls[call_id] = CallRecord(call_id, name, args, True, batch.number, issued_at=now)
            batch.ids.append(call_id)

    def end_response(self, response_id: str, status: ResponseStatus) -> None:
        """``response.done``: calls of a cancelled or incomplete response must not be answered;
        one already answered was executed before the client could know (a warning)."""
        batch = self._batches.get(response_id)
        if batch is None:
            return
        batch.status = status
        batch.done_at = self.clock()
        if status == "completed":
            return
        for call_id in batch.ids:
            record = self.calls[call_id]
            if record.open:
                move(record, "cancel")
            elif record.state == "answered":
                self.flag(
                    "answered_cancelled_call",
                    f"call {call_id} ({record.name}) was answered before response.done, and its "
                    f"response ended {status}: wait for response.done's status before executing",
                    record.answer.parts[-1] if record.answer and record.answer.parts else None,
                    "warning",
                )

    def read(self, response_id: str) -> None:
        """The client has read ``response.done`` of ``response_id`` (its pong to the ping sent
        right behind it): from now on it can act on the response's calls."""
        batch = self._batches.get(response_id)
        now = self.clock()
        for call_id in batch.ids if batch else []:
            if self.calls[call_id].read_at is None:
                self.calls[call_id].read_at = now

    def outputs_read(self, response_id: str) -> None:
        """Every output of ``response_id`` was in and the client then answered a ping: its
        ``response.create`` is due, whoever closes the connection later."""
        batch = self._batches.get(response_id)
        if batch is not None:
            batch.outputs_read = True

    def complete_batch(self, call_id: str) -> str | None:
        """The response whose batch the output for ``call_id`` completed, if it did."""
        record = self.calls.get(call_id)
        if record is None:
            return None
        batch = self._batch_of(record)
        return batch.response_id if self._complete(batch) else None

    def server_started(self, *, fresh_input: bool = False) -> ResponseKind:
        """The server starts a response by itself (turn detection, ``auto_response``): one that
        starts once every output of the latest batch is in continues it."""
        batch = self._latest()
        if batch is not None and self._complete(batch) and not batch.continued:
            batch.auto_started = True
            return "turn" if fresh_input else "continuation"
        return "turn"

    def due_for_auto_start(self) -> bool:
        """The latest batch is complete and nothing has continued it yet."""
        batch = self._latest()
        return batch is not None and self._complete(batch) and not batch.continued

    def awaiting_continuation(self) -> list[str]:
        """Responses whose every output is in and read by the client, and not continued."""
        return [
            batch.response_id
            for batch in self._batches.values()
            if batch.outputs_read and self._complete(batch) and not batch.continued
        ]

    def latest_calls(self) -> list[CallRecord]:
        """The calls of the latest batch, in issue order."""
        batch = self._latest()
        return [self.calls[call_id] for call_id in batch.ids] if batch else []

    def resolved_answer(self, call_id: str) -> Answer | None:
        record = self.calls[call_id]
        return record.answer if record.state == "answered" else None

    # client side -------------------------------------------------------------------------------

    def on_output(self, message: dict[str, Any], call_id: str, output: str) -> CallRecord | None:
        """Check one ``function_call_output``; returns the call it answers (None: unknown)."""
        record = self.calls.get(call_id)
        if record is None:
            self.flag("unknown_call_id", f"output for unknown call_id {call_id}", message)
            return None
        if record.state == "cancelled":
            self.flag(
                "answered_cancelled_call",
                f"output for call {call_id} ({record.name}), whose response ended "
                f"{self._batch_of(record).status}: it must not be answered",
                message,
            )
            return record
        if record.state == "answered":
            self.flag("duplicate_answer", f"second output for call {call_id}", message)
            return record
        record.answer = Answer(call_id, None, answer_payload(output), parts=[message])
        move(record, "answer")
        self._check_timing(message, self._batch_of(record))
        return record

    def on_response_create(
        self,
        message: dict[str, Any],
        *,
        fresh_input: bool,
        active: Literal["client", "server"] | None = None,
        out_of_band: bool = False,
    ) -> ResponseKind:
        """Judge a ``response.create``: once after each batch, and only when it is complete.
        Returns what the response it opens is for.

        ``fresh_input``: user input arrived since the last response (a new turn). ``active``:
        who started the response in progress (it is refused): a server-started one may not
        have been read yet, so the create crossing it is no fault; the client's own is.
        """
        if out_of_band:
            return "out_of_band"
        batch = self._latest()
        if active is not None:
            if active == "client" and batch is not None and batch.status == "in_progress":
                self.flag(
                    "early_response_create",
                    f"response.create while response {batch.response_id} with calls is still "
                    "in progress: wait for its response.done, then for every output",
                    message,
                )
            return "refused"
        if batch is None or batch.status != "completed":
            return "turn"
        missing = [i for i in batch.ids if self.calls[i].open]
        if missing:  # the response starts without them: it continues nothing
            if fresh_input:
                return "turn"
            self.flag(
                "early_response_create",
                f"response.create before every output of response {batch.response_id} was in "
                f"(missing: {', '.join(missing)}): the model goes on without them",
                message,
            )
            return "early"
        if not batch.continued:
            batch.creates += 1  # a new turn's create continues the batch as well
            return "turn" if fresh_input else "continuation"
        if fresh_input:
            return "turn"
        batch.creates += 1
        if batch.auto_started and batch.creates == 1:
            self.flag(
                "extra_response_create",
                f"response.create after the response the server started by itself for the "
                f"outputs of {batch.response_id} had ended (a warning: a create sent before "
                "the client could read that response crossed it)",
                message,
                "warning",
            )
        else:
            self.flag(
                "extra_response_create",
                f"response.create number {batch.creates + batch.auto_started} after the outputs "
                f"of response {batch.response_id}: send exactly one per batch",
                message,
            )
        return "nothing"

    def finish(self, ending: Ending) -> None:
        """The connection ended: outputs sent one after another before the rest never came
        are serial all the same; open calls were never answered, complete batches never
        continued. When the server closed, or the calls' ``response.done`` crossed the
        client's close (it never answered the ping behind it), the client had no chance to
        answer: warnings only. A missing continuation is an error however the connection
        ended once the client answered a ping after the batch's last output (it had its
        chance); before that, a close by the server may have crossed it: a warning."""
        crashed = ending == "client_crash" and bool(self.pending())
        for batch in self._batches.values():
            unfinished = any(self.calls[i].open for i in batch.ids)
            if batch.status == "completed" and len(batch.answer_times) >= 2 and unfinished:
                self.check_serial(
                    None,
                    [batch.done_at, *batch.answer_times],
                    f"the first {len(batch.answer_times)} of the {len(batch.ids)} calls of "
                    f"response {batch.response_id}",
                    "run them concurrently",
                )
        super().finish(ending)
        if crashed:
            return
        server_closed = ending == "server_close"
        for batch in self._batches.values():
            if self._complete(batch) and not batch.continued:
                self.flag(
                    "missing_response_create",
                    f"every output of response {batch.response_id} was sent but no "
                    "response.create followed: the model never continued",
                    None,
                    "warning" if server_closed and not batch.outputs_read else "error",
                )

    def _check_timing(self, message: dict[str, Any], batch: _Batch) -> None:
        """The Gemini checker's timing checks, from the batch's ``response.done`` (when the
        client may run its calls): outputs held past ``held_answers``, and the outputs of two
        or more calls sent one after another, each at least ``serial_gap`` after the one
        before (the shape of a loop awaiting each call in turn)."""
        if batch.status != "completed":
            return
        now = self.clock()
        batch.answer_times.append(now)
        what = f"outputs of response {batch.response_id}"
        self.check_held(message, batch.flagged, now - batch.done_at, what, "its response.done")
        if len(batch.ids) < 2 or any(self.calls[i].open for i in batch.ids):
            return
        self.check_serial(
            message,
            [batch.done_at, *batch.answer_times],
            f"the {len(batch.ids)} calls of response {batch.response_id}",
            "run them concurrently",
        )

    # internals ---------------------------------------------------------------------------------

    def _latest(self) -> _Batch | None:
        return next(reversed(self._batches.values()), None)

    def _batch_of(self, record: CallRecord) -> _Batch:
        return next(b for b in self._batches.values() if b.number == record.batch)

    def _complete(self, batch: _Batch) -> bool:
        return (
            batch.status == "completed"
            and bool(batch.ids)
            and all(self.calls[i].state == "answered" for i in batch.ids)
        )
