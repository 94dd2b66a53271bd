"""What every connection of one emulator shares: options, the transcript, violations, handles."""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from livebridge.emulator.contract import CallRecord, Thresholds, Violation
from livebridge.emulator.faults import Faults
from livebridge.emulator.history import Ledger, footprint
from livebridge.errors import UsageError
from livebridge.vendors.gemini import wire

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
    """How much of its report an emulator keeps; None keeps everything (an emulator in a test
    lives for one test).

    ``max_bytes`` bounds the whole report in memory: each transcript entry, finished
    connection, resumption handle and violation is charged what it holds (``history.footprint``)
    and, past the budget, the oldest detail goes first (transcript entries, finished
    connections with their calls, handles), then the oldest violations, until a quarter of the
    budget is free. ``transcript``, ``violations``, ``connections`` and ``handles`` bound those
    by count (the newest kept, the oldest going a quarter of the bound at a time).
    ``Shared.dropped`` counts the transcript entries that went; ``Shared.tally`` counts every
    violation, kept or not.
    """

    transcript: int | None = None
    violations: int | None = None
    connections: int | None = None
    handles: int | None = None
    max_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.max_bytes is not None and self.max_bytes < 1:
            raise UsageError(f"Retention: max_bytes must be at least 1, got {self.max_bytes}")


#: What ``livebridge emulator`` keeps by default, serving for as long as it runs: 16 MiB of
#: report (about 20,000 transcript entries of a text conversation, or 230 sessions of 5 turns).
STANDALONE_BYTES = 16 << 20
STANDALONE = Retention(max_bytes=STANDALONE_BYTES)


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
    ``retention`` bounds what is kept (``Retention``); ``forget`` is called with the finished
    connections ``Retention.max_bytes`` lets go (the emulator keeps the connection lists).
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
    forget: Callable[[set[int]], None] = lambda ids: None
    #: Transcript entries dropped so far (``transcript[i]`` is entry ``dropped + i`` of all).
    dropped: int = 0
    #: Every violation reported, kept or not, by (severity, kind).
    tally: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: What ``Retention.max_bytes`` charges (None: no byte budget).
    ledger: Ledger | None = None

    def __post_init__(self) -> None:
        if self.retention.max_bytes is not None:
            self.ledger = Ledger(self.retention.max_bytes)

    @property
    def kept_bytes(self) -> int | None:
        """The bytes the report holds, as ``Retention.max_bytes`` counts them (None: unbounded)."""
        return None if self.ledger is None else self.ledger.kept

    def record(self, direction: Direction, session: str, message: dict[str, Any]) -> None:
        entry = TranscriptEntry(time.monotonic(), direction, session, message)
        self.transcript.append(entry)
        self.dropped += trim(self.transcript, self.retention.transcript)
        self._charge(entry)
        self.notify()

    def report(self, violation: Violation) -> None:
        self.violations.append(violation)
        self.tally[violation.severity, violation.kind] += 1
        trim(self.violations, self.retention.violations)
        self._charge(violation, summary=True)
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
        # The records are the connection's (charged when it ends): the handle holds the map.
        self._charge(_Handle(handle), footprint(handle) + footprint(calls, exclude=calls.values()))

    def finished(self, connection: object) -> None:
        """A connection was judged: from now on it is history, charged what it holds."""
        self._charge(connection, footprint(connection, exclude=(self,)))
        self.notify()

    def _charge(self, item: object, size: int | None = None, *, summary: bool = False) -> None:
        if self.ledger is None:
            return
        gone = self.ledger.charge(item, footprint(item) if size is None else size, summary=summary)
        if gone:
            self._let_go(gone)

    def _let_go(self, gone: list[Any]) -> None:
        """Drop what the ledger let go: the oldest items of each list, handles, connections."""
        ids = {id(item) for item in gone}
        entries = _leading(self.transcript, ids)
        del self.transcript[:entries]
        self.dropped += entries
        del self.violations[: _leading(self.violations, ids)]
        for item in gone:
            if isinstance(item, _Handle):
                self.handles.pop(item.handle, None)
        self.forget(ids)


@dataclass(frozen=True, slots=True)
class _Handle:
    """A resumption handle as the ledger knows it."""

    handle: str


def _leading(items: list[Any], ids: set[int]) -> int:
    """How many of the first ``items`` are among ``ids`` (the ledger lets go oldest first)."""
    count = 0
    for item in items:
        if id(item) not in ids:
            break
        count += 1
    return count


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
