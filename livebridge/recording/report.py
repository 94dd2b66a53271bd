"""What a replay found: divergences from the recording, the report, and the bounds it judges by.

Below both the emulator's replay side (which finds divergences) and ``livebridge.recording.replay``
(which runs a replay and returns the report).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from livebridge.recording.read import Recording

Pace = Literal["recorded", "fast"]
DivergenceKind = Literal[
    "unanswered",
    "kind_changed",
    "value_changed",
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
#: After the app left a connection, the replay waits this long (at least the answer timeout)
#: for it to open the next recorded one, then reports it ``connection_missing``.
RECONNECT_WAIT = 10.0
#: The model name the replaying session asks for (the emulator serves any).
REPLAY_MODEL = "gemini-live-replay"
#: A ``value_changed`` divergence names at most this many differing fields.
SHOWN_DIFFERENCES = 3


@dataclass(frozen=True, slots=True)
class Divergence:
    """One way the replayed app answered differently from the recording."""

    kind: DivergenceKind
    line: int  # the recording's line of the entry it differs from
    call_id: str | None  # the recorded call id
    function: str | None
    detail: str

    def __str__(self) -> str:
        """``line 12: get_weather: answered error, recorded ok (...) [kind_changed, call c-1]``:
        where and what first, the kind and the recorded call id (long ones) last."""
        what = f"{self.function}: " if self.function else ""
        tags = ", ".join([self.kind, *([f"call {self.call_id}"] if self.call_id else [])])
        return f"line {self.line}: {what}{self.detail} [{tags}]"


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
            for call_id in _called(message):
                issued[call_id] = entry.t
        elif entry.ev == "send":
            for call_id in _answered(message):
                at = issued.get(call_id)
                if at is not None:
                    slowest = max(slowest, entry.t - at)
    return max(MIN_ANSWER_TIMEOUT, 10 * slowest)


def _called(message: dict[str, Any]) -> list[str]:
    """The call ids a server message issues: Gemini's ``toolCall``, or a GPT-Live backend's
    ``function_call`` item done."""
    calls = (message.get("toolCall") or {}).get("functionCalls") or []
    found = [str(call.get("id")) for call in calls if isinstance(call, dict)]
    event = message.get("event")
    if isinstance(event, dict) and event.get("type") == "response.output_item.done":
        item = event.get("item")
        if isinstance(item, dict) and item.get("type") == "function_call":
            found.append(str(item.get("call_id")))
    return found


def _answered(message: dict[str, Any]) -> list[str]:
    """The call ids a client message answers: Gemini's ``toolResponse``, or a GPT-Live
    ``function_call_output`` item."""
    answers = (message.get("toolResponse") or {}).get("functionResponses") or []
    found = [str(answer.get("id")) for answer in answers if isinstance(answer, dict)]
    item = message.get("item")
    if isinstance(item, dict) and item.get("type") == "function_call_output":
        found.append(str(item.get("call_id")))
    return found


def differences(
    recorded: Any, replayed: Any, ignore: Collection[str] = (), path: str = ""
) -> Iterator[str]:
    """Where two answers' bodies differ, one ``field: recorded X, replayed Y`` each, depth first.

    ``ignore`` holds fields not compared: a name without a dot is ignored at any depth
    (``timestamp``), a dotted path only there from the body's root (``booking.created_at``,
    list items by their index: ``slots.0``).
    """
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        for key in [*recorded, *(k for k in replayed if k not in recorded)]:
            where = f"{path}.{key}" if path else str(key)
            if key in ignore or where in ignore:
                continue
            if key not in replayed:
                yield f"{where}: recorded {_shown(recorded[key])}, missing now"
            elif key not in recorded:
                yield f"{where}: not recorded, replayed {_shown(replayed[key])}"
            else:
                yield from differences(recorded[key], replayed[key], ignore, where)
    elif isinstance(recorded, list) and isinstance(replayed, list):
        if len(recorded) != len(replayed):
            where = path or "the answer"
            yield f"{where}: recorded {len(recorded)} items, replayed {len(replayed)}"
            return
        for index, (old, new) in enumerate(zip(recorded, replayed, strict=True)):
            where = f"{path}.{index}" if path else str(index)
            if where not in ignore:
                yield from differences(old, new, ignore, where)
    elif recorded != replayed or isinstance(recorded, bool) != isinstance(replayed, bool):
        yield f"{path or 'the answer'}: recorded {_shown(recorded)}, replayed {_shown(replayed)}"


def _shown(value: Any, width: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= width else text[: width - 3] + "..."
