"""PrometheusObserver counts what happened; the endpoint serves it on loopback only."""

from __future__ import annotations

import logging
import re
import socket
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from livebridge.calls.call import Call, Outcome
from livebridge.calls.observers import (
    AnswerSent,
    BatchStarted,
    CallSettled,
    CallStarted,
    MessageSeen,
    SessionClosed,
    SessionOpened,
)
from livebridge.observe.metrics import MAX_FUNCTION_LABELS, SECONDS_BUCKETS, PrometheusObserver
from livebridge.observe.scrape import asgi_app, serve
from tests.support.observer_workload import drive_workload


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def series_count(registry: CollectorRegistry) -> int:
    return sum(len(family.samples) for family in registry.collect())


async def test_metrics_equal_what_the_workload_did() -> None:
    registry = CollectorRegistry()
    observer = PrometheusObserver(registry)
    expected = await drive_workload([observer])

    outcomes = {kind for _, kind, _ in expected.calls}
    assert outcomes == {"ok", "error", "timeout", "cancelled", "rejected", "duplicate"}
    assert sum(expected.orphans.values()) == 1
    for (function, outcome, behavior), count in expected.calls.items():
        labels = {"function": function, "outcome": outcome, "behavior": behavior}
        assert sample(registry, "livebridge_tool_calls_total", **labels) == count, labels
    assert sample(registry, "livebridge_tool_calls_total", function="launch_rockets") == 0
    total = sum(expected.calls.values())
    assert (
        sum(
            s.value
            for family in registry.collect()
            if family.name == "livebridge_tool_calls"
            for s in family.samples
            if s.name.endswith("_total")
        )
        == total
    )

    for function, count in expected.handler_runs.items():
        name = "livebridge_tool_call_duration_seconds_count"
        assert sample(registry, name, function=function) == count, function
    for (function, behavior), count in expected.turnarounds.items():
        name = "livebridge_tool_turnaround_seconds_count"
        assert sample(registry, name, function=function, behavior=behavior) == count
    for function, count in expected.ok_results.items():
        assert sample(registry, "livebridge_tool_result_bytes_count", function=function) == count
    assert expected.dedups
    for (function, reason), count in expected.dedups.items():
        name = "livebridge_tool_dedups_total"
        assert sample(registry, name, function=function, reason=reason) == count
    for (function, reason), count in expected.rejections.items():
        name = "livebridge_tool_rejections_total"
        assert sample(registry, name, function=function, reason=reason) == count
    for metric, counts in [
        ("livebridge_tool_truncations_total", expected.truncations),
        ("livebridge_tool_cancellations_total", expected.cancellations),
        ("livebridge_tool_orphans_total", expected.orphans),
    ]:
        assert counts, metric
        for function, count in counts.items():
            assert sample(registry, metric, function=function) == count, (metric, function)

    sizes = expected.batch_sizes
    assert sample(registry, "livebridge_tool_calls_per_turn_count") == len(sizes)
    assert sample(registry, "livebridge_tool_calls_per_turn_sum") == sum(sizes)
    assert sample(registry, "livebridge_tool_calls_per_turn_bucket", le="6.0") == 2
    assert sample(registry, "livebridge_tool_calls_in_flight") == 0
    assert sample(registry, "livebridge_sessions_active") == expected.sessions_active
    for reason, count in expected.reconnects.items():
        assert sample(registry, "livebridge_session_reconnects_total", reason=reason) == count
    for (direction, kind), count in expected.messages.items():
        labels = {"direction": direction, "type": kind}
        assert sample(registry, "livebridge_messages_total", **labels) == count, labels


async def test_in_flight_follows_running_handlers() -> None:
    registry = CollectorRegistry()
    observer = PrometheusObserver(registry, functions=["slow"])
    call = Call("a", "slow", {})
    observer.on_event(CallStarted("s", 1, call, "BLOCKING", 0.0))
    observer.on_event(CallStarted("t", 1, call, "BLOCKING", 0.0))  # same id, other session
    assert sample(registry, "livebridge_tool_calls_in_flight") == 2
    outcome = Outcome("a", "slow", "ok", {"output": 1}, latency=0.3, result_bytes=12)
    observer.on_event(CallSettled("s", 1, call, "BLOCKING", outcome, 0.0, True))
    assert sample(registry, "livebridge_tool_calls_in_flight") == 1
    bucket = "livebridge_tool_call_duration_seconds_bucket"
    assert sample(registry, bucket, function="slow", le="0.25") == 0
    assert sample(registry, bucket, function="slow", le="0.5") == 1


def test_buckets_span_one_millisecond_to_a_minute() -> None:
    assert SECONDS_BUCKETS[0] == 0.001
    assert SECONDS_BUCKETS[-1] == 60.0
    assert list(SECONDS_BUCKETS) == sorted(SECONDS_BUCKETS)


def _invented_calls(observer: PrometheusObserver, count: int) -> None:
    for n in range(count):
        name = f"invented_{n}"
        call = Call(f"id-{n}", name, {"n": n})
        rejected = Outcome(
            call.id, name, "rejected", {"error": {"type": "unknown_function", "message": "?"}}
        )
        observer.on_event(BatchStarted(f"s-{n}", n, 1))
        observer.on_event(CallSettled(f"s-{n}", n, call, "BLOCKING", rejected, 0.0, False))
        observer.on_event(AnswerSent(f"s-{n}", [rejected], [0.01], ["BLOCKING"], [False]))
        # Even a dispatcher that marks the invented name as known cannot widen the labels.
        ran = Outcome(call.id, name, "ok", {"output": n}, latency=0.002, result_bytes=20)
        observer.on_event(CallStarted(f"s-{n}", n, call, "BLOCKING", 0.0))
        observer.on_event(CallSettled(f"s-{n}", n, call, "BLOCKING", ran, 0.0, True))
        observer.on_event(MessageSeen(f"s-{n}", "received", f"kind{n}"))


@pytest.mark.parametrize("functions", [["get_weather", "book_table"], None])
def test_invented_function_names_leave_series_bounded(functions: list[str] | None) -> None:
    small, large = CollectorRegistry(), CollectorRegistry()
    _invented_calls(PrometheusObserver(small, functions=functions), 10)
    _invented_calls(PrometheusObserver(large, functions=functions), 10_000)
    if functions is not None:
        assert series_count(large) == series_count(small)
        assert sample(large, "livebridge_tool_calls_total", function="other", outcome="ok",
                      behavior="BLOCKING") == 10_000  # fmt: skip
    else:
        # Without a registry list, names past MAX_FUNCTION_LABELS fold into "other".
        families = {f.name: f for f in large.collect()}
        functions_seen = {s.labels["function"] for s in families["livebridge_tool_calls"].samples}
        assert len(functions_seen) == MAX_FUNCTION_LABELS + 1
        assert series_count(large) < 200 * (MAX_FUNCTION_LABELS + 1)
    messages = [s for f in large.collect() if f.name == "livebridge_messages" for s in f.samples]
    assert {s.labels["type"] for s in messages} == {"other"}


def _get(url: str, accept: str | None = None) -> tuple[str, str]:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers["Content-Type"], response.read().decode()


async def test_serve_exposes_both_text_formats_on_loopback() -> None:
    registry = CollectorRegistry()
    observer = PrometheusObserver(registry)
    await drive_workload([observer])
    with serve(registry=registry) as server:
        assert server.host == "127.0.0.1"
        assert server.url == f"http://127.0.0.1:{server.port}/metrics"
        content_type, text = await anyio.to_thread.run_sync(_get, server.url)
        assert content_type.startswith("text/plain")
        names = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
        assert "livebridge_tool_calls_total" in names
        accept = "application/openmetrics-text; version=1.0.0"
        content_type, text = await anyio.to_thread.run_sync(_get, server.url, accept)
        assert content_type.startswith("application/openmetrics-text")
        assert text.rstrip().endswith("# EOF")
        assert "livebridge_tool_turnaround_seconds_bucket" in text


def _non_loopback_address() -> str | None:
    """This machine's address on its default route, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent for a UDP connect
        except OSError:
            return None
        address: str = probe.getsockname()[0]
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_endpoint_is_not_reachable_beyond_loopback_by_default() -> None:
    with serve(registry=CollectorRegistry()) as server:
        assert server.host == "127.0.0.1"  # the bound socket's own address
        with socket.create_connection(("127.0.0.1", server.port), timeout=5):
            pass
        address = _non_loopback_address()
        if address is not None:
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection((address, server.port), timeout=5).close()


def test_binding_beyond_loopback_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with (
        caplog.at_level(logging.WARNING, "livebridge.observe.metrics"),
        serve(host="0.0.0.0", registry=CollectorRegistry()) as server,
    ):
        assert server.host == "0.0.0.0"
    assert "reachable beyond this machine" in caplog.text
    with caplog.at_level(logging.WARNING, "livebridge.observe.metrics"):
        caplog.clear()
        serve(registry=CollectorRegistry()).close()
    assert caplog.text == ""


async def test_asgi_app_serves_the_registry() -> None:
    registry = CollectorRegistry()
    observer = PrometheusObserver(registry)
    observer.on_event(SessionOpened("s"))
    observer.on_event(SessionOpened("t"))
    observer.on_event(SessionClosed("t", "done"))
    app = asgi_app(registry)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/metrics",
        "query_string": b"",
        "headers": [(b"accept", b"text/plain")],
    }
    await app(scope, receive, send)
    assert sent[0]["status"] == 200
    body = b"".join(m.get("body", b"") for m in sent[1:]).decode()
    assert "livebridge_sessions_active 1.0" in body


def test_counters_that_never_fired_read_zero() -> None:
    # A dashboard shows 0, not "no data", for what has not happened yet.
    registry = CollectorRegistry()
    PrometheusObserver(registry, functions=["get_weather"])
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for sample in family.samples
        if sample.name.endswith("_total")
    }
    expected = [
        ("livebridge_tool_calls_total", {"function": "get_weather", "outcome": "timeout"}),
        ("livebridge_tool_calls_total", {"function": "other", "outcome": "ok"}),
        ("livebridge_tool_orphans_total", {"function": "get_weather"}),
        ("livebridge_session_reconnects_total", {"reason": "go_away"}),
        ("livebridge_store_lease_events_total", {"event": "lost"}),
    ]
    for name, labels in expected:
        matching = [
            value
            for (sample, pairs), value in samples.items()
            if sample == name and labels.items() <= dict(pairs).items()
        ]
        assert matching and set(matching) == {0.0}, (name, labels)


def test_an_idle_registry_exports_few_series() -> None:
    # Three tools and nothing happened yet: what a ratio or an alert needs at 0, and no more
    # (rejections, dedups and store errors by operation appear with their first event).
    registry = CollectorRegistry()
    PrometheusObserver(registry, functions=["get_weather", "book_table", "lookup_order"])
    text = generate_latest(registry).decode()
    # (the process's MCP servers export their own series, whichever registry is scraped)
    series = [
        line for line in text.splitlines() if line and not line.startswith(("#", "livebridge_mcp_"))
    ]
    page = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    said = re.search(r"(\d+) series for three tools", page)
    assert said is not None, "docs/metrics.md says how many series an idle registry exports"
    assert len(series) == int(said.group(1)), (len(series), said.group(0))
    assert "livebridge_tool_rejections_total{" not in text
    assert "livebridge_store_errors_total{" not in text
