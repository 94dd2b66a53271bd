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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

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


@dataclass(frozen=True, slots=True)
class Derived:
    """What the rest of the package reads of a table: the sets and maps below are
    ``derive(ENDINGS)``; a test derives them from a table with one more row."""

    failures: frozenset[str]
    zero_outcomes: tuple[str, ...]
    trace_errors: frozenset[str]
    shown: tuple[str, ...]
    colours: dict[str, str]
    labels: dict[str, str]


def derive(table: Sequence[Ending]) -> Derived:
    """The failure set, the outcomes exported at 0, the trace's errors, the names shown, the
    colours and the metric labels of ``table``."""
    outcomes = [row for row in table if row.stage == "outcome"]
    return Derived(
        failures=frozenset(row.name for row in outcomes if row.failure),
        zero_outcomes=tuple(row.name for row in outcomes if row.zero),
        trace_errors=frozenset(row.name for row in table if row.trace_error),
        shown=tuple(dict.fromkeys(row.name for row in table if row.name != "answered")),
        colours={row.name: row.colour for row in reversed(table)},  # an outcome's first
        labels={row.name: row.label for row in outcomes if row.label is not None},
    )


_DERIVED = derive(ENDINGS)
#: Every outcome kind, in the order reports list them.
OUTCOME_KINDS: tuple[OutcomeKind, ...] = get_args(OutcomeKind)
FATE_KINDS: tuple[FateKind, ...] = get_args(FateKind)
#: Outcome kinds never served to a later request: the request runs again.
FAILURES = _DERIVED.failures
#: Outcome kinds exported at 0 for every known function (a failure ratio's denominator).
ZERO_OUTCOMES = _DERIVED.zero_outcomes
#: Endings (an answered call's outcome, or a fate) whose trace record says the call failed.
TRACE_ERRORS = _DERIVED.trace_errors
#: How a person reads a call's end: its outcome when answered, else its fate (the demo's
#: summary, ``EventsDropped.settled``), in table order, each name once.
SHOWN = _DERIVED.shown
_COLOURS = _DERIVED.colours
_LABELS = _DERIVED.labels


def is_failure(kind: OutcomeKind) -> bool:
    """Is this kind a failure? A failed outcome is never served to a later request: the request
    runs again."""
    return kind in FAILURES


def metric_label(kind: str) -> str:
    """The ``outcome`` label an outcome of ``kind`` is counted under."""
    return _LABELS.get(kind, kind)


def colour(ending: str) -> str:
    """The demo's ANSI colour for an ending (plain for a name the table does not know)."""
    return _COLOURS.get(ending, "0")


def markdown(table: Sequence[Ending] = ENDINGS) -> str:
    """The table as the docs show it (``docs/contract.md``; a test holds them equal)."""
    lines = [
        "| ending | is | means | failure | counted in | on the wire |",
        "|---|---|---|---|---|---|",
    ]
    for row in table:
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
