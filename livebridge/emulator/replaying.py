"""What every vendor's replay side shares: the recorded pace, how an answer is judged, and
the report (``Replay``).

An answer body is ``{"output": ...}`` or ``{"error": {...}}`` on every wire (the ledger's
encoder writes both); its kind is ``ok`` or ``error``, an error is compared by its ``type``
only (its message may quote what changes from run to run).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Collection
from typing import Any

from livebridge.recording.read import Entry, Recording
from livebridge.recording.report import (
    MAX_GAP,
    SHOWN_DIFFERENCES,
    SLOW_FACTOR,
    SLOW_MARGIN,
    Divergence,
    DivergenceKind,
    Pace,
    ReplayReport,
    default_answer_timeout,
    differences,
)


class Clock:
    """Recorded pace: sleep until a recorded time, counted from the last point both share.

    A gap between two entries longer than ``MAX_GAP`` seconds is played as ``MAX_GAP``: a
    recording (hand-edited, or of a session left idle) cannot hold the replay for longer."""

    def __init__(self, pace: Pace, start: float) -> None:
        self._recorded = pace == "recorded"
        self._anchor = (asyncio.get_running_loop().time(), start)
        self._last = start  # the recorded time of the last entry played

    async def until(self, t: float) -> None:
        if self._recorded:
            loop = asyncio.get_running_loop()
            gap = t - self._last
            if gap > MAX_GAP:  # played as MAX_GAP: the later times follow from there
                real, recorded = self._anchor
                self._anchor = (real + (self._last - recorded) + MAX_GAP, t)
            self._last = max(self._last, t)
            wait = self._anchor[0] + (t - self._anchor[1]) - loop.time()
            await asyncio.sleep(min(max(0.0, wait), MAX_GAP))

    def sync(self, t: float) -> None:
        """Recorded time ``t`` is now (the client's answers arrived)."""
        self._anchor = (asyncio.get_running_loop().time(), t)
        self._last = max(self._last, t)


def kind(body: Any) -> str:
    """``error`` for an error answer, else ``ok``."""
    return "error" if isinstance(body, dict) and "error" in body else "ok"


def error_type(body: Any) -> Any:
    """An error answer reduced to its ``type`` (what a replay compares of it)."""
    error = body.get("error") if isinstance(body, dict) else None
    return {"error": {"type": error.get("type")}} if isinstance(error, dict) else body


def error_text(body: Any, width: int = 120) -> str:
    """An error answer as ``RuntimeError: the service is down``, else its JSON; shortened."""
    error = body.get("error")
    if isinstance(error, dict) and ("type" in error or "message" in error):
        text = ": ".join(str(error[k]) for k in ("type", "message") if error.get(k) is not None)
    else:
        text = json.dumps(error, default=repr)
    return text if len(text) <= width else text[: width - 3] + "..."


class Replay:
    """What every vendor's replay keeps and reports, whatever its wire: the recorded
    connections played one per accepted connection, the call ids the replay issued in place of
    the recorded ones, the app's answers, and the report they make.

    A vendor's replay (``gemini.replay``, ``openai_live.replay``) plays its wire and fills
    ``_calls`` (the entry that issued each recorded call) and ``_answered`` (each recorded
    call's answers, in order); it says where its answers are read from (``_scan_now``), how
    one is named (``_name_of``) and which recorded answers a connection still owed
    (``_owed``).
    """

    def __init__(
        self,
        recording: Recording,
        *,
        pace: Pace,
        answer_timeout: float | None,
        ignore_fields: Collection[str],
    ) -> None:
        self.recording = recording
        self.pace = pace
        #: Fields of the answers not compared (``livebridge.recording.report.differences``).
        self.ignore_fields = frozenset(ignore_fields)
        self.answer_timeout = answer_timeout or default_answer_timeout(recording)
        self._connections = recording.connections()
        self.report = ReplayReport(
            recording.path,
            recorded_connections=len(self._connections),
            truncated_at=recording.truncated.line if recording.truncated else None,
        )
        #: True once the last recorded connection was played to its end.
        self.done = not self._connections
        #: When (monotonic) a connection was played to its end while the recording holds
        #: another the app has not opened yet; None while one plays.
        self.between: float | None = None
        self._order = itertools.count()
        self._played = [-1] * len(self._connections)  # next entry of each; -1: never opened
        self._issued: dict[str, str] = {}  # recorded call id -> the id the replay issued
        self._recorded: dict[str, str] = {}  # issued id -> recorded id
        self._issued_at: dict[str, float] = {}  # issued id -> when the emulator sent it
        self._answers: dict[str, list[Any]] = {}  # issued id -> the app's answers, in order
        self._judged: set[tuple[str, int]] = set()  # (recorded id, n) compared
        self._calls: dict[str, Entry] = {}  # recorded id -> the entry that issued it
        self._answered: dict[str, list[Entry]] = {}  # recorded id -> its recorded answers
        self._line = 0  # the last recorded line played
        self._final: ReplayReport | None = None

    def _scan_now(self) -> None:
        """Read the app's answers that arrived since the last look."""
        raise NotImplementedError

    def _name_of(self, recorded_id: str | None, answer: Any) -> str | None:
        """The function an answer of the app is for, as a divergence names it."""
        raise NotImplementedError

    def _owed(self, entries: list[Entry]) -> list[tuple[Entry, tuple[str, int], str | None]]:
        """The recorded answers among ``entries``: each entry, its (call id, n) and function."""
        raise NotImplementedError

    def _unexpected(self, recorded_id: str) -> bool:
        """Whether an answer the recording does not have for this call is a divergence (a
        vendor's replay may know calls whose answering was a race when recorded)."""
        return True

    def _judge(
        self, entry: Entry, recorded_id: str, n: int, name: Any, recorded: Any
    ) -> Any | None:
        """Judge the app's ``n``-th answer to a recorded call against the recorded one (its
        kind, its values, how long it took), from the recorded answer's ``entry``: the app's
        answer, or None when it never came."""
        self._judged.add((recorded_id, n))
        self.report.answers += 1
        recorded_kind = kind(recorded)
        issued = self._issued.get(recorded_id, "")
        answers = self._answers.get(issued, [])
        if len(answers) <= n:
            why = f"within {self.answer_timeout:g} s" if issued else "(the call was not issued)"
            text = f"no answer {why}, recorded {recorded_kind}"
            self._diverge("unanswered", entry.line, recorded_id, name, text)
            return None
        answer = answers[n]
        if answer.kind != recorded_kind:
            extra = f" ({answer.detail})" if answer.detail else ""
            text = f"answered {answer.kind}, recorded {recorded_kind}{extra}"
            self._diverge("kind_changed", entry.line, recorded_id, name, text)
        else:
            self._compare(entry, recorded_id, name, recorded, answer.body)
        call = self._calls.get(recorded_id)
        took = answer.at - self._issued_at.get(issued, answer.at)
        recorded_took = entry.t - call.t if call is not None else 0.0
        if took > SLOW_FACTOR * recorded_took + SLOW_MARGIN:
            text = (
                f"answered in {took:.2f} s, recorded {recorded_took:.2f} s (over "
                f"{SLOW_FACTOR:g}x + {SLOW_MARGIN:g} s)"
            )
            self._diverge("slow", entry.line, recorded_id, name, text)
        return answer

    def _compare(
        self, entry: Entry, recorded_id: str, name: Any, recorded: Any, replayed: Any
    ) -> None:
        """A ``value_changed`` divergence naming the first fields whose values differ (of an
        error, only its ``type``: its message may quote what changes from run to run)."""
        if kind(recorded) == "error":
            recorded, replayed = error_type(recorded), error_type(replayed)
        found = list(
            itertools.islice(
                differences(recorded, replayed, self.ignore_fields), 1 + SHOWN_DIFFERENCES
            )
        )
        if found:
            more = "; ..." if len(found) > SHOWN_DIFFERENCES else ""
            text = "the answer changed: " + "; ".join(found[:SHOWN_DIFFERENCES]) + more
            self._diverge("value_changed", entry.line, recorded_id, name, text)

    def finish(self) -> ReplayReport:
        """The final report: call once the app is gone (the first call computes it)."""
        if self._final is not None:
            return self._final
        self._scan_now()
        for issued, answers in self._answers.items():
            recorded = self._recorded.get(issued)
            if recorded is None:
                for answer in answers:
                    text = f"answered {answer.kind} a call id the replay never issued ({issued})"
                    self._diverge(
                        "unexpected_answer", answer.line, None, self._name_of(None, answer), text
                    )
                continue
            entries = self._answered.get(recorded, [])
            if not entries and self.recording.truncated is not None:
                continue  # a cut recording does not know the answers after the cut
            if not entries and not self._unexpected(recorded):
                continue
            for answer in answers[len(entries) :]:
                if entries:
                    line = entries[-1].line
                    text = f"answered again ({answer.kind}), recorded {len(entries)} answer(s)"
                else:
                    line = self._calls[recorded].line
                    text = f"answered {answer.kind}, the recording has no answer for it"
                name = self._name_of(recorded, answer)
                self._diverge("unexpected_answer", line, recorded, name, text)
        self._unreached()
        self._final = self.report
        return self.report

    def _unreached(self) -> None:
        """Recorded answers the replay never reached, and connections never opened."""
        total = len(self._connections)
        for index, entries in enumerate(self._connections):
            if self._played[index] < 0:
                text = f"connection {index + 1} of {total} was never opened: no reconnection"
                self._diverge("connection_missing", entries[0].line, None, None, text)
                continue
            for entry, numbered, name in self._owed(entries[self._played[index] :]):
                if numbered in self._judged:
                    continue
                self.report.answers += 1
                text = f"not replayed: connection {index + 1} ended before this answer"
                self._diverge("unanswered", entry.line, numbered[0], name, text)

    def _diverge(
        self, kind_of: DivergenceKind, line: int, call_id: str | None, name: Any, detail: str
    ) -> None:
        function = str(name) if name is not None else None
        self.report.divergences.append(Divergence(kind_of, line, call_id, function, detail))
