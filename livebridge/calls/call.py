"""The vocabulary of a tool call: what the model asked for, and how each call ended.

These types carry no behaviour; the dispatcher produces them, the ledger tracks them and the
vendor encoders turn them into wire messages. What each outcome kind means is in
``livebridge.calls.endings``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args

import msgspec

from livebridge.calls.endings import OutcomeKind

Behavior = Literal["BLOCKING", "NON_BLOCKING"]
Scheduling = Literal["SILENT", "WHEN_IDLE", "INTERRUPT"]
#: Why a call was answered from another call's result instead of running (``journal``: a
#: result a previous owner of the conversation recorded, ``livebridge.store``).
DedupReason = Literal["twin", "reissue", "key", "journal"]

BEHAVIORS: tuple[Behavior, ...] = get_args(Behavior)
SCHEDULINGS: tuple[Scheduling, ...] = get_args(Scheduling)
DEDUP_REASONS: tuple[DedupReason, ...] = get_args(DedupReason)


class Call(msgspec.Struct, frozen=True, gc=False):
    """One function call as the model issued it.

    ``args`` is whatever the model sent; the dispatcher validates it against the tool's types.
    """

    id: str
    name: str
    args: Any = msgspec.field(default_factory=dict)


class UnreadableArguments(msgspec.Struct, frozen=True, gc=False):
    """A call's arguments as the decoder could not read them (not JSON, not valid Unicode,
    over a size bound), in place of ``Call.args``: that call alone is answered
    ``invalid_arguments`` with ``reason``, and the other calls of its message run."""

    reason: str


@dataclass(frozen=True, slots=True)
class CallContext:
    """What a handler may ask for by declaring a parameter of this type.

    ``idempotency_key`` is the same for every run attempt of one request (a retry after a
    failure, another worker after a takeover) and different for two requests, even with the
    same arguments: forward it to the side effect (a payment provider's idempotency key,
    ``livebridge.calls.keys``). ``fence`` is the conversation's lease epoch the handler runs
    under (None without a store): it only grows, so a system that keeps the highest fence it
    saw can refuse a worker that lost the conversation.
    """

    call_id: str
    function: str
    turn: int
    session_id: str | None = None
    idempotency_key: str = ""
    fence: int | None = None


@dataclass(frozen=True, slots=True)
class Result:
    """A handler's return value with per-result options for NON_BLOCKING answers.

    Returning ``Result(value, scheduling="INTERRUPT")`` overrides the tool's default scheduling.
    """

    value: Any
    scheduling: Scheduling | None = None


@dataclass(frozen=True, slots=True)
class Partial:
    """One item streamed by an async-generator handler before it finishes."""

    call_id: str
    name: str
    response: dict[str, Any]
    scheduling: Scheduling | None = None


class Outcome(msgspec.Struct, frozen=True, gc=False):
    """How one call ended, and the response payload that answers it.

    ``response`` is exactly what goes on the wire: ``{"output": ...}`` or ``{"error": {...}}``
    (empty for the end of a stream whose items were already sent as partials). A msgspec
    Struct, as every record built per call is (benchmarks/PROFILE.md, Hot core).
    """

    call_id: str
    name: str
    kind: OutcomeKind
    response: dict[str, Any]
    latency: float = 0.0
    result_bytes: int = 0
    truncated: bool = False
    original_bytes: int | None = None
    duplicate_of: str | None = None
    scheduling: Scheduling | None = None
    dedup: DedupReason | None = None  # set when answered from ``duplicate_of`` without running

    @property
    def is_error(self) -> bool:
        """True when the response carries an ``error`` payload."""
        return "error" in self.response


class AnswerEncoder(Protocol):
    """Turns one answer into the vendor's wire dict (``gemini_live.encode`` for Live)."""

    def __call__(
        self,
        answer: Outcome | Partial,
        *,
        behavior: Behavior,
        scheduling: Scheduling | None = None,
        streaming: bool = False,
        anonymous: bool = False,
    ) -> dict[str, Any]: ...
