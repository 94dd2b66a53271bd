"""The client's side of the tool-call contract, checked message by message (no I/O).

The server side issues and cancels calls; every ``toolResponse`` is fed in and checked. Each breach
becomes a ``Violation`` carrying the offending message.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from livebridge import wire

Severity = Literal["error", "warning"]
CallState = Literal["pending", "streaming", "answered", "cancelled", "superseded"]

#: Every kind of violation the checker reports.
VIOLATION_KINDS = (
    "unknown_id",
    "cancelled_id",
    "duplicate_answer",
    "missing_id",
    "missing_name",
    "name_mismatch",
    "scheduling_on_blocking",
    "will_continue_on_blocking",
    "split_batch",
    "unanswered",
    "audio_during_blocking",
    "malformed_message",
    "deprecated_media_chunks",
)


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
    issued_at: float = 0.0  # time.monotonic() when the server sent it

    @property
    def open(self) -> bool:
        return self.state in ("pending", "streaming")


#: Seconds after a ``toolCall`` during which client audio is taken to have been in flight.
AUDIO_IN_FLIGHT = 0.25


class Checker:
    """Tracks the calls of one connection and records the client's violations into ``sink``."""

    def __init__(
        self,
        session: str,
        sink: list[Violation],
        *,
        check_audio_during_blocking: bool = True,
        known: dict[str, CallRecord] | None = None,
    ) -> None:
        self.session = session
        self.sink = sink
        self.check_audio_during_blocking = check_audio_during_blocking
        self.calls: dict[str, CallRecord] = copy.deepcopy(known) if known else {}
        self._batches = 0
        self._batch_messages: dict[int, int] = {}
        self._audio_flagged: set[int] = set()

    # server side -------------------------------------------------------------------------------

    def issue(
        self, calls: list[tuple[str, str, dict[str, Any], bool]], reissue_of: str | None = None
    ) -> int:
        """Register one ``toolCall``'s calls (id, name, args, blocking); returns its batch."""
        self._batches += 1
        for call_id, name, args, blocking in calls:
            self.calls[call_id] = CallRecord(
                call_id,
                name,
                args,
                blocking,
                self._batches,
                reissue_of=reissue_of,
                issued_at=time.monotonic(),
            )
        return self._batches

    def cancel(self, ids: list[str]) -> None:
        for call_id in ids:
            record = self.calls.get(call_id)
            if record is not None and record.open:
                record.state = "cancelled"

    def pending(self) -> list[CallRecord]:
        return [record for record in self.calls.values() if record.open]

    def blocking_pending(self) -> list[CallRecord]:
        return [record for record in self.calls.values() if record.open and record.blocking]

    # client side -------------------------------------------------------------------------------

    def on_tool_response(
        self, message: dict[str, Any], responses: list[wire.FunctionResponse]
    ) -> list[tuple[CallRecord, wire.FunctionResponse]]:
        """Check one ``toolResponse``; returns the answers accepted (record, response)."""
        accepted: list[tuple[CallRecord, wire.FunctionResponse]] = []
        batches_touched: set[int] = set()
        for response in responses:
            if not response.id:
                self._flag("missing_id", "function response without an id", message)
                continue
            if not response.name:
                self._flag("missing_name", f"function response {response.id} has no name", message)
            record = self.calls.get(response.id)
            if record is None:
                self._flag("unknown_id", f"answer for unknown call id {response.id}", message)
                continue
            if record.state == "cancelled":
                self._flag("cancelled_id", f"answer for cancelled call {response.id}", message)
                continue
            if record.state == "answered":
                self._flag("duplicate_answer", f"second answer for call {response.id}", message)
                continue
            if response.name and response.name != record.name:
                self._flag(
                    "name_mismatch",
                    f"call {response.id} is {record.name!r}, answered as {response.name!r}",
                    message,
                )
            if record.blocking and response.scheduling is not None:
                self._flag(
                    "scheduling_on_blocking",
                    f"scheduling {response.scheduling} on blocking call {response.id}",
                    message,
                )
            if record.blocking and response.will_continue is not None:
                self._flag(
                    "will_continue_on_blocking",
                    f"will_continue on blocking call {response.id}",
                    message,
                )
            self._record(record, response)
            accepted.append((record, response))
            if record.blocking:
                batches_touched.add(record.batch)
        for batch in batches_touched:
            self._batch_messages[batch] = self._batch_messages.get(batch, 0) + 1
            if self._batch_messages[batch] == 2:
                self._flag(
                    "split_batch",
                    f"blocking calls of one toolCall (batch {batch}) answered in several messages",
                    message,
                    "warning",
                )
        return accepted

    def on_audio(self, message: dict[str, Any]) -> None:
        """Audio streamed while a blocking call is pending (flagged once per batch).

        Audio arriving within ``AUDIO_IN_FLIGHT`` of the ``toolCall`` was on its way before the
        client could have read the call, so it is not held against the client.
        """
        if not self.check_audio_during_blocking:
            return
        known_since = time.monotonic() - AUDIO_IN_FLIGHT
        pending = self.blocking_pending()
        batches = {r.batch for r in pending if r.issued_at <= known_since} - self._audio_flagged
        if batches:
            self._audio_flagged |= batches
            self._flag(
                "audio_during_blocking",
                "audio streamed while a blocking call is pending",
                message,
                "warning",
            )

    def flag(
        self, kind: str, text: str, offending: dict[str, Any] | None, severity: Severity = "error"
    ) -> None:
        """Record a violation found outside the tool-response path (e.g. a malformed frame)."""
        self._flag(kind, text, offending, severity)

    def finish(self, *, server_closed: bool) -> None:
        """The connection ended: every call still open was never answered."""
        for record in self.pending():
            self._flag(
                "unanswered",
                f"call {record.id} ({record.name}) never answered",
                None,
                "warning" if server_closed else "error",
            )

    # internals ---------------------------------------------------------------------------------

    def _record(self, record: CallRecord, response: wire.FunctionResponse) -> None:
        if record.answer is None:
            record.answer = Answer(record.id, response.name, response.response)
        answer = record.answer
        answer.response = response.response
        answer.scheduling = response.scheduling
        answer.will_continue = response.will_continue
        answer.parts.append(wire.to_builtins(response))
        record.state = "streaming" if response.will_continue else "answered"
        if record.state == "answered":
            self._supersede(record)

    def _supersede(self, record: CallRecord) -> None:
        """A re-issued call and its original are one question: one answer settles both."""
        related = {record.id, record.reissue_of} - {None}
        for other in self.calls.values():
            linked = other.id in related or other.reissue_of in related
            if other is not record and linked and other.open:
                other.state = "superseded"

    def _flag(
        self, kind: str, text: str, offending: dict[str, Any] | None, severity: Severity = "error"
    ) -> None:
        self.sink.append(Violation(kind, text, offending, self.session, severity))
