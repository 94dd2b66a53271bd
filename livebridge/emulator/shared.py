"""What every connection of one emulator shares: options, the transcript, violations, handles."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from livebridge.emulator.contract import CallRecord, Thresholds, Violation
from livebridge.emulator.faults import Faults
from livebridge.errors import ScenarioError
from livebridge.vendors.gemini import wire

__all__ = [
    "MAX_FRAME_BYTES",
    "MAX_REASON_BYTES",
    "STANDALONE",
    "Report",
    "Retention",
    "ScenarioError",
    "ServiceOptions",
    "Shared",
    "TranscriptEntry",
    "UserTurn",
    "cap_reason",
    "new_call_id",
    "trim",
    "usage_metadata",
]

Direction = Literal["client", "server"]

MAX_REASON_BYTES = 123
#: Client frames larger than this are refused with 1007, as the service does with frames of
#: about 1 MB (googleapis/mcp-toolbox #3637).
MAX_FRAME_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class TranscriptEntry:
    """One message that crossed the wire (or a close), with its monotonic timestamp."""

    at: float
    direction: Direction
    session: str
    message: dict[str, Any]


@dataclass(frozen=True, slots=True)
class UserTurn:
    """A finished user utterance: typed text or audio."""

    kind: Literal["text", "audio"]
    text: str | None = None
    audio_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class Report:
    """A NON_BLOCKING answer the model acted on, and how (its scheduling)."""

    call_id: str
    scheduling: str
    at: float


@dataclass(frozen=True, slots=True)
class ServiceOptions:
    """How the emulated service behaves where the real one is known to vary.

    ``reissue_after``: seconds before an unanswered BLOCKING call is issued again under a new id
    within its turn (None: never). ``reissue_next_turn``: a BLOCKING call an interruption left
    unanswered is issued again when the model's next turn starts. ``cancel_on_interrupt``: a
    barge-in sends ``toolCallCancellation`` for the turn's open calls (False: the calls are
    dropped without one). ``check_audio_during_blocking``: report audio sent while a BLOCKING
    call is pending. ``thresholds``: the bounds of the timing checks. ``auto_response``
    (OpenAI Realtime): the server starts the next response by itself once every output of a
    response's calls is in, as the service sometimes does.
    """

    reissue_after: float | None = None
    reissue_next_turn: bool = False
    cancel_on_interrupt: bool = True
    check_audio_during_blocking: bool = True
    thresholds: Thresholds = field(default_factory=Thresholds)
    auto_response: bool = False


@dataclass(frozen=True, slots=True)
class Retention:
    """How much of its report an emulator keeps: the newest ``transcript`` entries,
    ``violations``, ``connections`` (their sessions) and resumption ``handles``; None keeps
    everything (an emulator in a test lives for one test). The oldest go first, a quarter of
    the bound at a time; ``Shared.dropped`` counts what went."""

    transcript: int | None = None
    violations: int | None = None
    connections: int | None = None
    handles: int | None = None


#: What ``livebridge emulator`` keeps, serving for as long as it runs: about 100 MB at most.
STANDALONE = Retention(transcript=20_000, violations=10_000, connections=1_000, handles=1_000)


def trim(items: list[Any], bound: int | None) -> int:
    """Drop the oldest of ``items`` once they pass ``bound`` by a quarter; how many went."""
    if bound is None or len(items) <= bound + bound // 4:
        return 0
    excess = len(items) - bound
    del items[:excess]
    return excess


@dataclass(slots=True)
class Shared:
    """State shared by every connection of one emulator (lives on the server thread).

    ``on_violation`` is called on the server thread for each violation as it is found.
    ``retention`` bounds what is kept (``Retention``).
    """

    faults: Faults
    options: ServiceOptions
    notify: Callable[[], None]
    on_violation: Callable[[Violation], None] | None = None
    transcript: list[TranscriptEntry] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    handles: dict[str, dict[str, CallRecord]] = field(default_factory=dict)
    stopping: bool = False
    retention: Retention = field(default_factory=Retention)
    #: Transcript entries dropped so far (``transcript[i]`` is entry ``dropped + i`` of all).
    dropped: int = 0

    def record(self, direction: Direction, session: str, message: dict[str, Any]) -> None:
        self.transcript.append(TranscriptEntry(time.monotonic(), direction, session, message))
        self.dropped += trim(self.transcript, self.retention.transcript)
        self.notify()

    def report(self, violation: Violation) -> None:
        self.violations.append(violation)
        trim(self.violations, self.retention.violations)
        if self.on_violation is not None:
            self.on_violation(violation)
        self.notify()

    def keep_handle(self, handle: str, calls: dict[str, CallRecord]) -> None:
        """A resumable handle and the calls it knows; the oldest go beyond the bound."""
        self.handles[handle] = calls
        bound = self.retention.handles
        if bound is not None and len(self.handles) > bound:
            for old in list(self.handles)[: len(self.handles) - bound]:
                del self.handles[old]


def cap_reason(reason: str) -> str:
    """Cut a close reason to 123 UTF-8 bytes without splitting a character."""
    return reason.encode()[:MAX_REASON_BYTES].decode("utf-8", "ignore")


def usage_metadata(prompt_tokens: int, response_tokens: int, modality: str) -> wire.UsageMetadata:
    """The ``usageMetadata`` that goes with ``turnComplete`` (rough token counts, at least 1)."""
    prompt, response = max(prompt_tokens, 1), max(response_tokens, 1)
    return wire.UsageMetadata(
        prompt_token_count=prompt,
        response_token_count=response,
        total_token_count=prompt + response,
        response_tokens_details=[
            wire.ModalityTokenCount("AUDIO" if modality == "AUDIO" else "TEXT", response)
        ],
    )


def new_call_id() -> str:
    """A fresh call id in the service's form."""
    return f"function-call-{random.getrandbits(64)}"
