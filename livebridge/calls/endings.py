"""How a tool call ends, in one table: every outcome kind and every fate, once each.

A call ends twice over. Its **outcome** is what its handler (or the dispatcher, for a call it
refuses) produced: the ``Outcome`` whose ``kind`` is one of ``OutcomeKind``. Its **fate** is what
the ledger did with that delivery: answered (the outcome was sent), cancelled (the server withdrew
it) or orphaned (the connection that knew it is gone). ``ENDINGS`` holds both, a row each, with
what every other place needs to know about it: whether it is a failure, its metric series, what
goes on the wire, how the trace marks it, its colour in the demo. The failure set, the metric
labels, the trace's error set, the demo's colours and the docs tables derive from it.

This module is the table rather than ``calls/outcomes.py``: that one shapes the *payload* of each
outcome (the text the model reads, one builder per situation), while this one says what each kind
*is*; one concept per module. It imports nothing, so every layer may read it.

The ``Literal`` types are written out because a type checker needs them spelled; a test holds
them equal to the table's rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

__all__ = [
    "ENDINGS",
    "FAILURES",
    "FATE_KINDS",
    "OUTCOME_KINDS",
    "SHOWN",
    "TRACE_ERRORS",
    "ZERO_OUTCOMES",
    "Ending",
    "FateKind",
    "OutcomeKind",
    "colour",
    "is_failure",
    "markdown",
    "metric_label",
]

OutcomeKind = Literal["ok", "error", "timeout", "cancelled", "rejected", "duplicate"]
FateKind = Literal["answered", "cancelled", "orphaned"]


@dataclass(frozen=True, slots=True)
class Ending:
    """One row: an outcome kind (``stage="outcome"``) or a fate (``stage="fate"``).

    ``failure``: an outcome that is never served to a later request (the request runs again);
    None for a fate, which is never served (a later request is judged by the outcome, if its
    handler produced one). ``metric``: the Prometheus series it
    counts in (``label``: its value of the ``outcome`` label, if it has one). ``zero``: exported
    at 0 for every known function, so a failure ratio has a denominator before the first call.
    ``trace_error``: the trace's record and span of the call say it failed. ``wire``: what is
    sent to the model. ``colour``: an ANSI code for the demo's terminal.
    """

    name: str
    stage: Literal["outcome", "fate"]
    meaning: str
    failure: bool | None
    metric: str
    label: str | None
    zero: bool
    trace_error: bool
    wire: str
    colour: str


_CALLS = "livebridge_tool_calls_total"

ENDINGS: tuple[Ending, ...] = (
    Ending(
        "ok",
        "outcome",
        meaning="the handler returned a value (an idempotent twin shares it)",
        failure=False,
        metric=_CALLS,
        label="ok",
        zero=True,
        trace_error=False,
        wire='`{"output": value}`',
        colour="32",
    ),
    Ending(
        "error",
        "outcome",
        meaning="the handler raised, or its result cannot be encoded",
        failure=True,
        metric=_CALLS,
        label="error",
        zero=True,
        trace_error=True,
        wire='`{"error": {"type": <exception class>, ...}}`',
        colour="31",
    ),
    Ending(
        "timeout",
        "outcome",
        meaning="the handler did not finish within its timeout",
        failure=True,
        metric=_CALLS,
        label="timeout",
        zero=True,
        trace_error=True,
        wire='`{"error": {"type": "timeout", ...}}`',
        colour="33",
    ),
    Ending(
        "cancelled",
        "outcome",
        meaning="the handler was cancelled (the server withdrew the call, the session ended) "
        "or an irreversible call was not confirmed",
        failure=True,
        metric=f"{_CALLS}, livebridge_tool_cancellations_total",
        label="cancelled",
        zero=False,
        trace_error=False,
        wire='`{"error": {"type": "cancelled", ...}}` while the socket is open and the server '
        "did not withdraw the call; else nothing",
        colour="35",
    ),
    Ending(
        "rejected",
        "outcome",
        meaning="the handler did not run: unknown function, bad arguments, fan-out, approval, "
        "store",
        failure=True,
        metric=f"{_CALLS}, livebridge_tool_rejections_total",
        label="rejected",
        zero=False,
        trace_error=False,
        wire='`{"error": {"type": <reason>, ...}}`',
        colour="31",
    ),
    Ending(
        "duplicate",
        "outcome",
        meaning="answered from another call's result without running (a twin, a re-issue, a key)",
        failure=False,
        metric=f"{_CALLS}, livebridge_tool_dedups_total",
        label="duplicate",
        zero=False,
        trace_error=False,
        wire="the first call's answer, or `duplicate_call` / `already_answered` with "
        "`duplicate_of`",
        colour="36",
    ),
    Ending(
        "answered",
        "fate",
        meaning="its outcome was sent to the model",
        failure=None,
        metric="livebridge_tool_turnaround_seconds",
        label=None,
        zero=False,
        trace_error=False,
        wire="its outcome's answer",
        colour="32",
    ),
    Ending(
        "cancelled",
        "fate",
        meaning="the server withdrew the call (`toolCallCancellation`, a response that did "
        "not complete)",
        failure=None,
        metric="its handler's outcome, if it ran",
        label=None,
        zero=False,
        trace_error=False,
        wire="nothing is sent",
        colour="35",
    ),
    Ending(
        "orphaned",
        "fate",
        meaning="the connection that knew the call is gone (resumed without it, closed, dropped)",
        failure=None,
        metric="livebridge_tool_orphans_total",
        label=None,
        zero=False,
        trace_error=True,
        wire="nothing can be sent",
        colour="31",
    ),
)

_OUTCOMES = {row.name: row for row in ENDINGS if row.stage == "outcome"}
_FATES = {row.name: row for row in ENDINGS if row.stage == "fate"}

#: Every outcome kind, in the order reports list them.
OUTCOME_KINDS: tuple[OutcomeKind, ...] = get_args(OutcomeKind)
FATE_KINDS: tuple[FateKind, ...] = get_args(FateKind)
#: Outcome kinds never served to a later request: the request runs again.
FAILURES: frozenset[str] = frozenset(name for name, row in _OUTCOMES.items() if row.failure)
#: Outcome kinds exported at 0 for every known function (a failure ratio's denominator).
ZERO_OUTCOMES: tuple[str, ...] = tuple(name for name, row in _OUTCOMES.items() if row.zero)
#: Endings (an answered call's outcome, or a fate) whose trace record says the call failed.
TRACE_ERRORS: frozenset[str] = frozenset(row.name for row in ENDINGS if row.trace_error)
#: How a person reads a call's end: its outcome when answered, else its fate (the demo's
#: summary, ``EventsDropped.settled``), in table order, each name once.
SHOWN: tuple[str, ...] = tuple(dict.fromkeys(r.name for r in ENDINGS if r.name != "answered"))
_COLOURS = {row.name: row.colour for row in reversed(ENDINGS)}  # an outcome's first
_LABELS = {name: row.label for name, row in _OUTCOMES.items()}


def is_failure(kind: OutcomeKind) -> bool:
    """Is this kind a failure? A failed outcome is never served to a later request: the request
    runs again."""
    return kind in FAILURES


def metric_label(kind: OutcomeKind) -> str:
    """The ``outcome`` label an outcome of ``kind`` is counted under."""
    return _LABELS.get(kind) or kind


def colour(ending: str) -> str:
    """The demo's ANSI colour for an ending (plain for a name the table does not know)."""
    return _COLOURS.get(ending, "0")


def markdown() -> str:
    """The table as the docs show it (``docs/contract.md``; a test holds them equal)."""
    lines = [
        "| ending | is | means | failure | counted in | on the wire |",
        "|---|---|---|---|---|---|",
    ]
    for row in ENDINGS:
        metric = ", ".join(f"`{m}`" if m.startswith("livebridge_") else m for m in _split(row))
        if row.label is not None:
            metric = metric.replace(f"`{_CALLS}`", f'`{_CALLS}{{outcome="{row.label}"}}`')
        failure = "by its outcome" if row.failure is None else "yes" if row.failure else "no"
        lines.append(
            f"| `{row.name}` | {row.stage} | {row.meaning} | {failure} | {metric} | {row.wire} |"
        )
    return "\n".join(lines) + "\n"


def _split(row: Ending) -> list[str]:
    return [part.strip() for part in row.metric.split(",")]
