"""What a replay found: divergences from the recording, the report, and the bounds it judges by.

Below both the emulator's replay side (which finds divergences) and ``livebridge.recording.replay``
(which runs a replay and returns the report).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from livebridge.recording.record import Recording

__all__ = [
    "MAX_GAP",
    "MIN_ANSWER_TIMEOUT",
    "REPLAY_MODEL",
    "SLOW_FACTOR",
    "SLOW_MARGIN",
    "Divergence",
    "DivergenceKind",
    "Pace",
    "ReplayReport",
    "default_answer_timeout",
]


Pace = Literal["recorded", "fast"]
DivergenceKind = Literal[
    "unanswered",
    "kind_changed",
    "batch_split",
    "slow",
    "unexpected_answer",
    "handle_changed",
    "connection_missing",
]

#: An answer is ``slow`` past SLOW_FACTOR x its recorded latency + SLOW_MARGIN seconds.
SLOW_FACTOR = 3.0
SLOW_MARGIN = 1.0
#: The default answer timeout is 10x the slowest recorded answer, and never under this.
MIN_ANSWER_TIMEOUT = 5.0
#: With ``pace="recorded"``, a gap between two entries longer than this (seconds) is played
#: as this: no recording holds a replay idle for longer.
MAX_GAP = 30.0
#: The model name the replaying session asks for (the emulator serves any).
REPLAY_MODEL = "gemini-live-replay"


@dataclass(frozen=True, slots=True)
class Divergence:
    """One way the replayed app answered differently from the recording."""

    kind: DivergenceKind
    line: int  # the recording's line of the entry it differs from
    call_id: str | None  # the recorded call id
    function: str | None
    detail: str

    def __str__(self) -> str:
        call = f" {self.function} ({self.call_id})" if self.call_id else ""
        return f"line {self.line}: {self.kind}{call}: {self.detail}"


@dataclass(slots=True)
class ReplayReport:
    """What a replay found: the divergences, and how many recorded answers were compared."""

    path: str
    answers: int = 0
    connections: int = 0
    recorded_connections: int = 0
    divergences: list[Divergence] = field(default_factory=list)
    #: The line of the recording's ``truncated`` entry (it hit its size bound), else None.
    truncated_at: int | None = None

    @property
    def ok(self) -> bool:
        return not self.divergences

    def render(self) -> str:
        """The report as text: a summary line, then one line per divergence."""
        lines = [
            f"{self.path}: {self.answers} answers on {self.connections} of "
            f"{self.recorded_connections} connection(s) replayed, "
            f"{len(self.divergences)} divergence(s)"
        ]
        if self.truncated_at is not None:
            lines.append(
                f"  note: the recording was cut at line {self.truncated_at} (it reached "
                "record_max_bytes); only what it holds was replayed"
            )
        lines += [f"  {d}" for d in self.divergences]
        return "\n".join(lines)


def default_answer_timeout(recording: Recording) -> float:
    """How long to wait for each answer: 10x the slowest recorded one, at least 5 s."""
    issued: dict[str, float] = {}
    slowest = 0.0
    for entry in recording.entries:
        message = entry.data.get("msg") or {}
        if entry.ev == "recv":
            for call in (message.get("toolCall") or {}).get("functionCalls") or []:
                issued[str(call.get("id"))] = entry.t
        elif entry.ev == "send":
            for answer in (message.get("toolResponse") or {}).get("functionResponses") or []:
                at = issued.get(str(answer.get("id")))
                if at is not None:
                    slowest = max(slowest, entry.t - at)
    return max(MIN_ANSWER_TIMEOUT, 10 * slowest)
