"""TraceObserver: one structured record and one span per settled call."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from livebridge.calls.call import Call, Outcome
from livebridge.calls.observers import BatchStarted, CallOrphaned, CallSettled
from livebridge.observe.trace import TraceObserver, cap_utf8
from tests.support.observer_workload import TURNS, drive_workload


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def records() -> Any:
    handler = Records()
    logger = logging.getLogger("livebridge.observe.trace")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler.records
    logger.removeHandler(handler)
    logger.setLevel(logging.NOTSET)


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The JSON-able trace record a ``TraceObserver`` attaches as ``record.livebridge``."""
    fields: dict[str, Any] = record.__dict__["livebridge"]
    return fields


def settled(
    args: Any, outcome: Outcome | None = None, started_at: float | None = None
) -> CallSettled:
    call = Call("call-7", "book_table", args)
    outcome = outcome or Outcome(
        "call-7", "book_table", "ok", {"output": 1}, latency=0.25, result_bytes=14
    )
    received = time.monotonic() - 1.0 if started_at is None else started_at
    return CallSettled("sess-1", 3, call, "NON_BLOCKING", outcome, received, True)


def test_one_record_per_settled_call_with_every_field(records: list[logging.LogRecord]) -> None:
    observer = TraceObserver(tracer_provider=TracerProvider())
    observer.on_event(BatchStarted("sess-1", 3, 1))
    before = time.time()
    observer.on_event(settled({"restaurant": "Noma", "people": 2}))
    assert len(records) == 1
    record = records[0]
    assert record.name == "livebridge.observe.trace"
    assert record.levelno == logging.INFO
    assert record.getMessage() == "tool call settled: book_table call-7 ok"
    fields = fields_of(record)
    assert json.loads(json.dumps(fields)) == fields
    assert fields == {
        "session": "sess-1",
        "turn": 3,
        "call_id": "call-7",
        "function": "book_table",
        "arguments": '{"restaurant":"Noma","people":2}',
        "started_at": fields["started_at"],
        "latency": 0.25,
        "outcome": "ok",
        "result_bytes": 14,
        "truncated": False,
        "behavior": "NON_BLOCKING",
    }
    assert before - 1.5 < fields["started_at"] < before - 0.5
    for key, value in fields.items():
        assert getattr(record, key) == value


def test_arguments_are_redacted_then_capped(records: list[logging.LogRecord]) -> None:
    def hide_card(function: str, args: dict[str, Any]) -> dict[str, Any]:
        assert function == "book_table"
        return {**args, "card": "***"}

    observer = TraceObserver(max_args_bytes=40, redact=hide_card)
    observer.on_event(settled({"card": "4111 1111 1111 1111", "note": "é" * 100}))
    text = fields_of(records[0])["arguments"]
    assert "4111" not in text
    assert text.startswith('{"card":"***","note":"é')
    assert text.endswith("...")
    assert len(text.encode()) <= 40


def test_a_failing_redaction_hides_the_arguments(records: list[logging.LogRecord]) -> None:
    def broken(function: str, args: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("oops")

    TraceObserver(redact=broken).on_event(settled({"secret": "s3cr3t"}))
    settled_records = [r for r in records if r.getMessage().startswith("tool call settled")]
    assert len(settled_records) == 1
    assert fields_of(settled_records[0])["arguments"] == '"<redaction failed>"'
    assert all("s3cr3t" not in r.getMessage() for r in records)


def test_cap_utf8_never_splits_a_character() -> None:
    assert cap_utf8("short", 10) == "short"
    capped = cap_utf8("ü" * 10, 8)
    assert capped == "üü..."
    assert len(capped.encode()) <= 8


async def test_workload_leaves_one_record_per_call(records: list[logging.LogRecord]) -> None:
    await drive_workload([TraceObserver(tracer_provider=TracerProvider())])
    ids = [fields_of(r)["call_id"] for r in records]
    planned = [p.call.id for turn in TURNS for p in turn] + ["c15"]
    assert sorted(ids) == sorted(planned)
    kinds = {fields_of(r)["call_id"]: fields_of(r)["outcome"] for r in records}
    assert kinds["c7"] == "timeout"
    assert kinds["c14"] == "cancelled"
    assert kinds["c15"] == "orphaned"
    assert {fields_of(r)["call_id"] for r in records if fields_of(r).get("truncated")} == {"c3"}


def test_spans_carry_the_record() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observer = TraceObserver(tracer_provider=provider)
    assert observer.spans_enabled
    start = time.monotonic() - 2.0
    observer.on_event(settled({"people": 2}, started_at=start))
    timeout = Outcome("call-7", "book_table", "timeout", {"error": {}}, latency=5.0)
    observer.on_event(settled({"people": 3}, outcome=timeout))

    ok_span, timeout_span = exporter.get_finished_spans()
    assert ok_span.name == "execute_tool book_table"
    attributes = dict(ok_span.attributes or {})
    assert attributes["gen_ai.tool.name"] == "book_table"
    assert attributes["gen_ai.tool.call.id"] == "call-7"
    assert attributes["livebridge.live.session"] == "sess-1"
    assert attributes["livebridge.turn"] == 3
    assert attributes["livebridge.outcome"] == "ok"
    assert attributes["livebridge.arguments"] == '{"people":2}'
    assert attributes["livebridge.result_bytes"] == 14
    assert attributes["livebridge.truncated"] is False
    assert ok_span.start_time is not None and ok_span.end_time is not None
    assert 1.5e9 < ok_span.end_time - ok_span.start_time < 10e9
    assert ok_span.status.status_code is StatusCode.UNSET
    assert timeout_span.status.status_code is StatusCode.ERROR


def test_without_opentelemetry_only_logs(
    monkeypatch: pytest.MonkeyPatch, records: list[logging.LogRecord]
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", None)  # makes the import fail
    observer = TraceObserver()
    assert not observer.spans_enabled
    observer.on_event(settled({"people": 2}))
    assert len(records) == 1


def test_an_orphaned_call_leaves_a_warning_record(caplog: pytest.LogCaptureFixture) -> None:
    observer = TraceObserver()
    with caplog.at_level(logging.INFO, logger="livebridge.observe.trace"):
        observer.on_event(CallOrphaned("s1", "c9", "book_table", "NON_BLOCKING", "dropped", True))
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert record.livebridge == {  # type: ignore[attr-defined]
        "session": "s1",
        "call_id": "c9",
        "function": "book_table",
        "outcome": "orphaned",
        "reason": "dropped",
    }
