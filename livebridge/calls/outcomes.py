"""One builder per row of the contract table: the ``Outcome`` each situation is answered with.

The dispatcher decides which row applies; these functions only shape the answer, so the text
the model reads for each situation is written in one place.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec

from livebridge.calls import payloads
from livebridge.calls.call import Call, DedupReason, Outcome, Scheduling
from livebridge.calls.endings import OutcomeKind
from livebridge.errors import StoreError, ToolError, UnserializableResult

log = logging.getLogger("livebridge.calls.dispatch")


def make(
    call: Call,
    kind: OutcomeKind,
    response: dict[str, Any],
    *,
    latency: float = 0.0,
    scheduling: Scheduling | None = None,
) -> Outcome:
    """An outcome for ``call`` whose answer is ``response`` (an error, or a ready result)."""
    name = call.name if isinstance(call.name, str) else repr(call.name)
    size = payloads.encoded_size(response)
    return Outcome(call.id, name, kind, response, latency, size, scheduling=scheduling)


def copied(call: Call, original: Outcome, kind: OutcomeKind | None, reason: DedupReason) -> Outcome:
    """``original``'s answer for another call id; a withdrawn original is an error for the copy."""
    if kind is None:
        kind = "error" if original.kind == "cancelled" else original.kind
    return msgspec.structs.replace(
        original, call_id=call.id, kind=kind, duplicate_of=original.call_id, dedup=reason
    )


def raised(
    call: Call, tool_name: str, exc: Exception, latency: float, *, expose: bool, sched: Any
) -> Outcome:
    """A handler raised ``exc``; only ``ToolError`` text (or ``expose``) reaches the model."""
    if isinstance(exc, StoreError):
        return store_unavailable(call, exc)
    if isinstance(exc, ToolError):
        response = payloads.error(exc.kind, exc.message, retryable=exc.retryable)
    elif isinstance(exc, UnserializableResult):
        log.error(
            "tool %s (call %s) returned an unserializable result: %s", tool_name, call.id, exc
        )
        message = f"The tool's result cannot be encoded as JSON ({exc})."
        response = payloads.error("unserializable_result", message, retryable=False)
    else:
        log.error("tool %s (call %s) raised", tool_name, call.id, exc_info=exc)
        kind = type(exc).__name__
        message = (
            (str(exc) or kind)
            if expose
            else f"The tool raised {kind}; details are in the server log."
        )
        response = payloads.error(kind, message, retryable=False)
    return make(call, "error", response, latency=latency, scheduling=sched)


def timeout(call: Call, tool_name: str, seconds: float, latency: float, sched: Any) -> Outcome:
    message = f"{tool_name} did not finish within {seconds:g} s."
    response = payloads.error("timeout", message, retryable=True)
    return make(call, "timeout", response, latency=latency, scheduling=sched)


def abandoned(call: Call, tool_name: str, seconds: float, sched: Any) -> Outcome:
    """The handler ignored its cancellation at the deadline: answered ``timeout`` without it."""
    message = f"{tool_name} did not finish within {seconds:g} s and ignored its cancellation."
    response = payloads.error("timeout", message, retryable=True)
    return make(call, "timeout", response, latency=seconds, scheduling=sched)


def cancelled(call: Call, latency: float) -> Outcome:
    response = payloads.error("cancelled", "The call was cancelled.", retryable=True)
    return make(call, "cancelled", response, latency=latency)


def denied(call: Call, reason: str) -> Outcome:
    """The tool's ``approve`` callback said no (or nothing in time): the handler did not run."""
    return make(call, "rejected", payloads.error("denied", reason, retryable=False))


def unconfirmed(call: Call, why: str) -> Outcome:
    """An irreversible call whose turn was withdrawn (interrupted, new input) before it was
    confirmed: the handler did not run, and the model is told so."""
    message = f"The call was not run: {why} before the turn that asked for it was confirmed."
    return make(call, "cancelled", payloads.error("cancelled", message, retryable=True))


def store_unavailable(call: Call, exc: Exception) -> Outcome:
    """The call needed the conversation store (its journal entry, a shared slot) and could
    not have it: the handler did not run. (A handler that raises a ``StoreError`` itself is
    answered the same way.)"""
    log.warning("call %s (%s) refused: %s", call.id, call.name, exc)
    message = f"The call was not run: the conversation store is unavailable ({exc}). Try again."
    return make(call, "rejected", payloads.error("store_unavailable", message, retryable=True))


def outcome_unknown(call: Call, earlier_id: str) -> Outcome:
    """A re-issued non-idempotent call that a worker which died had started: not run again."""
    message = (
        f"The previous worker died while running this call (as {earlier_id}); whether it took"
        " effect is unknown, so it was not run again. Check its effect before asking again."
    )
    response = payloads.error("outcome_unknown", message, retryable=False, duplicate_of=earlier_id)
    outcome = make(call, "rejected", response)
    return msgspec.structs.replace(outcome, duplicate_of=earlier_id)


def fanout(call: Call, limit: int) -> Outcome:
    """Short: a turn may carry thousands of these, and each one counts against the frame."""
    message = f"Only the first {limit} calls of a turn run; ask again later."
    return make(call, "rejected", payloads.error("fanout_limit", message, retryable=True))


def closing(call: Call) -> Outcome:
    message = "The app is ending this session; the call was not run. Ask again in a new session."
    return make(call, "rejected", payloads.error("session_closing", message, retryable=True))


def unknown(call: Call, available: list[str]) -> Outcome:
    what = f"{call.name!r}" if isinstance(call.name, str) else f"name {call.name!r} (not a string)"
    message = f"Unknown function {what}; available: {', '.join(available) or '(none)'}"
    return make(call, "rejected", payloads.error("unknown_function", message))


def invalid_arguments(call: Call, message: str) -> Outcome:
    return make(call, "rejected", payloads.error("invalid_arguments", message))


def already_answered(call: Call, kind: OutcomeKind) -> Outcome:
    """A re-delivered id answered long ago, whose answer the session no longer keeps
    (``CallPolicy.remembered_bytes``): not run again, and told so."""
    message = (
        f"Call {call.id} was answered earlier in this session ({kind}); it was not run again,"
        " and that answer is no longer kept. Use the answer given then."
    )
    response = payloads.error("already_answered", message, retryable=False, duplicate_of=call.id)
    outcome = make(call, "duplicate", response)
    return msgspec.structs.replace(outcome, duplicate_of=call.id)


def twin(call: Call, first_id: str) -> Outcome:
    message = f"Identical to call {first_id} in the same turn, which runs once; see its answer."
    response = payloads.error("duplicate_call", message, duplicate_of=first_id)
    outcome = make(call, "duplicate", response)
    return msgspec.structs.replace(outcome, duplicate_of=first_id, dedup="twin")
