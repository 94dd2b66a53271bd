"""``livebridge.calls.endings`` is the one table of how a call ends: every place that needs to
know something about an outcome kind or a fate reads it there, and the docs show it as it is."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any, get_args

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from prometheus_client import CollectorRegistry

from livebridge.calls import endings
from livebridge.calls.call import Call, Outcome
from livebridge.calls.endings import ENDINGS, Ending, FateKind, OutcomeKind
from livebridge.calls.lives import FATE_OF, FINAL
from livebridge.calls.observers import CallSettled
from livebridge.demo.driver import CallView, Exchange, summarize
from livebridge.demo.render import Terminal
from livebridge.observe import trace
from livebridge.observe.metrics import ZERO_OUTCOMES, PrometheusObserver
from livebridge.observe.trace import TraceObserver
from livebridge.protocol.events import EventBuffer, ToolCallSettled

DOCS = Path(__file__).resolve().parents[1] / "docs"


def rows(stage: str) -> list[str]:
    return [row.name for row in ENDINGS if row.stage == stage]


def test_every_outcome_kind_and_every_fate_has_one_row() -> None:
    assert rows("outcome") == list(get_args(OutcomeKind)) == list(endings.OUTCOME_KINDS)
    assert rows("fate") == list(get_args(FateKind)) == list(endings.FATE_KINDS)
    assert sorted(FATE_OF.values()) == sorted(endings.FATE_KINDS)  # the ledger's moves
    assert sorted(FINAL) == sorted(endings.FATE_KINDS)
    # A fate is never an outcome: the ledger alone decides it.
    assert "orphaned" not in endings.OUTCOME_KINDS and "answered" not in endings.OUTCOME_KINDS


def test_the_failure_set_is_the_tables() -> None:
    failures = [row.name for row in ENDINGS if row.stage == "outcome" and row.failure]
    assert failures == ["error", "timeout", "cancelled", "rejected"]
    assert [kind for kind in endings.OUTCOME_KINDS if endings.is_failure(kind)] == failures


def test_the_metric_labels_are_the_tables() -> None:
    registry = CollectorRegistry()
    observer = PrometheusObserver(registry, functions=["f"])
    assert tuple(r.name for r in ENDINGS if r.stage == "outcome" and r.zero) == ZERO_OUTCOMES
    outcome_rows = [row for row in ENDINGS if row.stage == "outcome"]
    for kind, row in zip(endings.OUTCOME_KINDS, outcome_rows, strict=True):
        call = Call(f"c-{kind}", "f")
        outcome = Outcome(call.id, "f", kind, {})
        observer.on_event(CallSettled(None, 0, call, "BLOCKING", outcome, 0.0, True))
        labels = {"function": "f", "outcome": row.label or "", "behavior": "BLOCKING"}
        assert registry.get_sample_value("livebridge_tool_calls_total", labels) == 1.0
    families = {f"{family.name}_total" for family in registry.collect()} | {
        family.name for family in registry.collect()
    }
    for row in ENDINGS:  # every series the table names is one the observer keeps
        for metric in row.metric.split(", "):
            assert metric in families or not metric.startswith("livebridge_"), metric


def test_the_trace_marks_what_the_table_marks() -> None:
    assert {"error", "timeout", "orphaned"} == endings.TRACE_ERRORS
    assert {row.name for row in ENDINGS if row.trace_error} == endings.TRACE_ERRORS
    assert not hasattr(trace, "FAILED_OUTCOMES")  # one home: the table


def test_the_demo_paints_each_ending_in_its_colour_and_survives_a_new_one() -> None:
    calls = [CallView(f"c{i}", "f", {}, "BLOCKING", name) for i, name in enumerate(endings.SHOWN)]
    calls.append(CallView("new", "f", {}, "BLOCKING", "reshelved"))  # a kind not in the table
    exchange = Exchange("hi", calls=calls)
    sink = io.StringIO()
    terminal = Terminal(sink, colour=True)
    lines = terminal.timeline(exchange)
    for line, call in zip(lines[1:], calls, strict=False):
        assert f"\x1b[{endings.colour(call.outcome or '')}m{call.outcome}" in line
    summary = summarize([exchange], [], [], [], 1)
    assert list(summary["outcomes"]) == list(endings.SHOWN)
    summary["outcomes"]["reshelved"] = 1  # as if the table had a row the renderer never saw
    summary["elapsed_s"] = 1.0  # the run adds it
    terminal.summary(summary)
    assert "\x1b[0mreshelved 1" in sink.getvalue()


def test_the_app_event_carries_fate_and_outcome_apart() -> None:
    answered = ToolCallSettled("a", "f", "answered", "cancelled", 0.1, 0.2)
    withdrawn = ToolCallSettled("w", "f", "cancelled", None, 0.0, reason="by the server")
    orphaned = ToolCallSettled("o", "f", "orphaned", None, 0.0, reason="closed")
    assert [e.ending for e in (answered, withdrawn, orphaned)] == [
        "cancelled",
        "cancelled",
        "orphaned",
    ]
    buffer = EventBuffer(settled_capacity=1)
    for event in (answered, withdrawn, orphaned):
        buffer.put(event)
    dropped = buffer.get_nowait()
    assert dropped is not None and getattr(dropped, "settled", None) == {"cancelled": 2}


def table_in(page: Path, header: str) -> str:
    text = page.read_text()
    start = text.index(header)
    end = text.find("\n\n", start)
    return text[start : len(text) if end < 0 else end + 1]


def test_the_contract_page_shows_the_table() -> None:
    assert table_in(DOCS / "contract.md", "| ending | is |") == endings.markdown()


def test_the_metrics_page_lists_the_outcome_labels_and_those_exported_at_zero() -> None:
    text = (DOCS / "metrics.md").read_text()
    calls = "| `livebridge_tool_calls_total`"
    (line,) = [line for line in text.splitlines() if line.startswith(calls)]
    labels = [row.label for row in ENDINGS if row.label is not None]
    assert re.findall(r"`([a-z]+)`", line.split("`outcome` (")[1].split(")")[0]) == labels
    zero = text.split("for each known function with outcome ")[1].split("\n(")[0]
    assert re.findall(r"`([a-z]+)`", zero) == list(ZERO_OUTCOMES)


def test_the_events_table_lists_every_fate_and_outcome() -> None:
    text = (DOCS / "configuration.md").read_text()
    (row,) = [line for line in text.splitlines() if line.startswith("| `ToolCallSettled(")]
    fates, outcomes = row.split("`outcome`", 1)
    assert re.findall(r"`([a-z]+)`", fates.split("|")[2]) == list(endings.FATE_KINDS)
    assert re.findall(r"`([a-z]+)`", outcomes.split(";")[0]) == list(endings.OUTCOME_KINDS)


@pytest.mark.parametrize("stage", ["outcome", "fate"])
def test_every_row_says_everything(stage: str) -> None:
    for row in (r for r in ENDINGS if r.stage == stage):
        assert row.meaning and row.wire and row.metric and re.fullmatch(r"[0-9;]+", row.colour)


def test_a_new_row_reaches_every_place_that_reads_the_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Adding an outcome kind is a row and the code that produces it: the failure set, the
    metric labels and the series exported at 0, the trace's status, the demo's colours and the
    docs table all follow from the row, with no edit elsewhere."""
    row = Ending(
        "reshelved",
        "outcome",
        meaning="put back for later",
        failure=True,
        metric="livebridge_tool_calls_total",
        label="reshelved",
        zero=True,
        trace_error=True,
        wire='`{"error": {"type": "reshelved"}}`',
        colour="34",
    )
    derived = endings.derive((*ENDINGS, row))
    monkeypatch.setattr(endings, "FAILURES", derived.failures)
    monkeypatch.setattr(endings, "ZERO_OUTCOMES", derived.zero_outcomes)
    monkeypatch.setattr(endings, "TRACE_ERRORS", derived.trace_errors)
    monkeypatch.setattr(endings, "SHOWN", derived.shown)
    monkeypatch.setattr(endings, "_COLOURS", derived.colours)
    monkeypatch.setattr(endings, "_LABELS", derived.labels)
    kind: Any = "reshelved"  # not an ``OutcomeKind`` until the Literal is written out too

    assert endings.is_failure(kind)
    registry = CollectorRegistry()
    observer = PrometheusObserver(registry, functions=["f"])
    labels = {"function": "f", "outcome": "reshelved", "behavior": "BLOCKING"}
    assert registry.get_sample_value("livebridge_tool_calls_total", labels) == 0.0  # at 0
    outcome = Outcome("c1", "f", kind, {"error": {"type": "reshelved"}})
    settled = CallSettled(None, 0, Call("c1", "f"), "BLOCKING", outcome, 0.0, True)
    observer.on_event(settled)
    assert registry.get_sample_value("livebridge_tool_calls_total", labels) == 1.0

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    TraceObserver(tracer_provider=provider).on_event(settled)
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR

    lines = Terminal(io.StringIO(), colour=True).timeline(
        Exchange("hi", calls=[CallView("c1", "f", {}, "BLOCKING", "reshelved")])
    )
    assert "\x1b[34mreshelved" in lines[1]
    assert summarize([], [], [], [], 1)["outcomes"]["reshelved"] == 0
    assert "| `reshelved` | outcome | put back for later | yes |" in endings.markdown(
        (*ENDINGS, row)
    )
