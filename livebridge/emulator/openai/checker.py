"""The client's side of the OpenAI Realtime tool-call contract, checked event by event (no I/O).

A response's ``function_call`` items are one batch. The client owes each call exactly one
``function_call_output`` (none for a call of a response that ended ``cancelled`` or
``incomplete``), then exactly one ``response.create`` once every output of the batch is in
(LIVE_PROTOCOL.md §6). Calls move through the Gemini checker's table (``TRANSITIONS``), so a
call's life reads the same on both vendors.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from livebridge.emulator.checker import Answer, CallRecord, Ending, Severity, Violation, move
from livebridge.errors import LocalProtocolError

__all__ = ["REALTIME_SEVERITIES", "RealtimeChecker", "ResponseStatus", "answer_payload"]

ResponseStatus = Literal["in_progress", "completed", "cancelled", "incomplete", "failed"]

#: Every kind of violation this checker reports, with its severity.
REALTIME_SEVERITIES: dict[str, Severity] = {
    "unknown_call_id": "error",
    "duplicate_answer": "error",
    "answered_cancelled_call": "error",
    "unanswered_call": "error",
    "early_response_create": "error",
    "extra_response_create": "error",
    "missing_response_create": "error",
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
    creates: int = 0  # the client's response.create counted against this batch
    auto_started: bool = False  # the server started the continuation itself
    moved_on: bool = False  # a new user turn came after it: later creates are not its

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


class RealtimeChecker:
    """Tracks the calls of one connection and reports the client's violations to ``sink``."""

    def __init__(self, session: str, sink: Callable[[Violation], None]) -> None:
        self.session = session
        self.sink = sink
        self.calls: dict[str, CallRecord] = {}
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
        for call_id, name, args in calls:
            self.calls[call_id] = CallRecord(call_id, name, args, True, batch.number)
            batch.ids.append(call_id)

    def end_response(self, response_id: str, status: ResponseStatus) -> None:
        """``response.done``: calls of a cancelled or incomplete response must not be answered;
        one already answered was executed before the client could know (a warning)."""
        batch = self._batches.get(response_id)
        if batch is None:
            return
        batch.status = status
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
        now = time.monotonic()
        for call_id in batch.ids if batch else []:
            if self.calls[call_id].read_at is None:
                self.calls[call_id].read_at = now

    def server_started(self) -> bool:
        """The server starts a response itself after a complete batch; True if one was due."""
        batch = self._latest()
        if batch is None or not self._complete(batch) or batch.continued or batch.moved_on:
            return False
        batch.auto_started = True
        return True

    def continues_batch(self) -> bool:
        """Whether a response started now (with no new user input) continues the latest
        batch rather than answering a new turn."""
        batch = self._latest()
        return batch is not None and batch.status == "completed" and not batch.moved_on

    def pending(self) -> list[CallRecord]:
        return [record for record in self.calls.values() if record.open]

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
        return record

    def on_response_create(
        self, message: dict[str, Any], *, fresh_input: bool, crossing_server: bool
    ) -> None:
        """Judge a ``response.create``: once after each batch, and only when it is complete.

        ``fresh_input``: user input arrived since the last response (a new turn, not a
        continuation). ``crossing_server``: it met a response the server started by itself (it
        gets ``conversation_already_has_active_response``; tolerated, not a violation).
        """
        batch = self._latest()
        if batch is None or batch.status in ("cancelled", "incomplete", "failed"):
            return
        if batch.status == "in_progress":
            self.flag(
                "early_response_create",
                f"response.create while response {batch.response_id} with calls is still in "
                "progress: wait for its response.done, then for every output",
                message,
            )
            return
        if any(self.calls[i].open for i in batch.ids):
            missing = [i for i in batch.ids if self.calls[i].open]
            self.flag(
                "early_response_create",
                f"response.create before every output of response {batch.response_id} was in "
                f"(missing: {', '.join(missing)}): the model goes on without them",
                message,
            )
            batch.creates += 1  # it continued the batch, too early
            return
        if batch.moved_on:
            return
        if fresh_input:
            batch.moved_on = True
            if not batch.continued:
                batch.creates += 1  # the new turn's create also continues the batch
            return
        if batch.auto_started and batch.creates == 0:
            batch.creates += 1
            if not crossing_server:  # that response already ended: the model answers twice
                self.flag(
                    "extra_response_create",
                    f"response.create after the response the server started by itself for the "
                    f"outputs of {batch.response_id} had ended (a warning: a create sent before "
                    "the client could read that response crossed it)",
                    message,
                    "warning",
                )
            return
        if batch.continued:
            batch.creates += 1
            self.flag(
                "extra_response_create",
                f"response.create number {batch.creates + batch.auto_started} after the outputs "
                f"of response {batch.response_id}: send exactly one per batch",
                message,
            )
            return
        batch.creates += 1

    def flag(
        self,
        kind: str,
        text: str,
        offending: dict[str, Any] | None,
        severity: Severity | None = None,
    ) -> None:
        """Report a violation of ``kind`` (severity: as in ``REALTIME_SEVERITIES`` unless given)."""
        severity = severity or REALTIME_SEVERITIES[kind]
        self.sink(Violation(kind, text, offending, self.session, severity))

    def finish(self, ending: Ending) -> None:
        """The connection ended: open calls were never answered, complete batches never
        continued. When the server closed, or the calls' ``response.done`` crossed the
        client's close (it never answered the ping behind it), the client had no chance:
        warnings only."""
        pending = self.pending()
        if ending == "client_crash" and pending:
            names = ", ".join(f"{r.id} ({r.name})" for r in pending)
            self.flag("client_crash", f"the client crashed with calls pending: {names}", None)
            return
        severity: Severity | None = "warning" if ending == "server_close" else None
        for record in pending:
            text = f"call {record.id} ({record.name}) never answered"
            if severity is None and record.read_at is None:
                text += ": its response.done crossed the client's close"
                self.flag("unanswered_call", text, None, "warning")
            else:
                self.flag("unanswered_call", text, None, severity)
        for batch in self._batches.values():
            if self._complete(batch) and not batch.continued and not batch.moved_on:
                self.flag(
                    "missing_response_create",
                    f"every output of response {batch.response_id} was sent but no "
                    "response.create followed: the model never continued",
                    None,
                    severity,
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
