"""What the call ledger (``livebridge.ledger``) takes in and hands out: plain records.

``gc=False`` msgspec Structs: never part of a reference cycle, built in C, one or more per call.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from livebridge.calls import Behavior, Call, Outcome, Scheduling

__all__ = [
    "Answered",
    "CallState",
    "Fate",
    "FateKind",
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


class LiveCall(msgspec.Struct, frozen=True, gc=False):
    """A call as received, with what the registry says about its tool."""

    call: Call
    behavior: Behavior = "BLOCKING"
    scheduling: Scheduling | None = None  # the tool's default, NON_BLOCKING only
    streaming: bool = False  # the handler is an async generator (NON_BLOCKING only)


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
