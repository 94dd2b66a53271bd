"""The Grafana dashboard is importable as is, and every query in it returns data from a real
Prometheus that scraped ``livebridge.observe.scrape.serve()`` while the workload ran."""

from __future__ import annotations

import json
import math
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import anyio
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from livebridge.calls.call import DedupReason
from livebridge.calls.observers import (
    LeaseChanged,
    SessionClosed,
    SessionOpened,
    StoreOperation,
    TurnMeasured,
)
from livebridge.observe.metrics import REJECTION_REASONS, PrometheusObserver
from livebridge.observe.scrape import serve
from livebridge.phone.bridge import (
    BargedIn,
    CallAnswered,
    CallEnded,
    FrameSkipped,
    MarkHeard,
    ModelAnswered,
)
from livebridge.phone.metrics import PhoneMetrics
from livebridge.phone.twilio import StreamStarted
from tests.support.observer_workload import TOOL_NAMES, drive_workload
from tests.support.prometheus_server import PrometheusServer

GRAFANA = Path(__file__).resolve().parents[2] / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "livebridge.json"
#: Grafana's variables, as Grafana would expand them for "All" over the last minute.
VARIABLES = {
    "$__rate_interval": "1m",
    "$__interval": "15s",
    "$__range": "1h",
    "${function}": ".*",
    "$function": ".*",
    "$job": ".*",
    "$instance": ".*",
}
METRIC = re.compile(r"\blivebridge_[a-z_]+")
WORKLOAD_ROUNDS = 3


def load_dashboard() -> dict[str, Any]:
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return dashboard


def walk_panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from walk_panels(panel.get("panels", []))


def queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL) for every target of every panel."""
    return [
        (panel["title"], target["expr"])
        for panel in walk_panels(dashboard["panels"])
        for target in panel.get("targets", [])
    ]


def expand(expr: str) -> str:
    for variable, value in VARIABLES.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"unexpanded variable in {expr}"
    return expr


def all_strings(node: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from all_strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from all_strings(item)


def test_dashboard_is_importable_as_is() -> None:
    dashboard = load_dashboard()
    assert dashboard["uid"] == "livebridge-tool-calls"
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    panels = [p for p in walk_panels(dashboard["panels"]) if p["type"] != "row"]
    ids = [p["id"] for p in walk_panels(dashboard["panels"])]
    assert len(ids) == len(set(ids))
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"]
    datasource_uids = {value["uid"] for key, value in all_strings(dashboard) if key == "datasource"}
    assert datasource_uids == {"${datasource}"}, "no hard-coded datasource"
    assert "__inputs" not in dashboard


def test_every_query_follows_the_job_and_instance_variables() -> None:
    # One dashboard for many workers and deployments: each series is narrowed by both.
    dashboard = load_dashboard()
    names = [v["name"] for v in dashboard["templating"]["list"]]
    assert names[:3] == ["datasource", "job", "instance"]
    for title, expr in queries(dashboard):
        for selector in re.findall(r"livebridge_[a-z_]+(\{[^}]*\})?", expr):
            assert 'job=~"$job"' in selector and 'instance=~"$instance"' in selector, title


def test_readme_maps_every_panel_to_its_metric() -> None:
    readme = (GRAFANA / "README.md").read_text()
    for panel in walk_panels(load_dashboard()["panels"]):
        if panel["type"] == "row":
            continue
        assert f"| {panel['title']} |" in readme, panel["title"]
        for metric in METRIC.findall(" ".join(t["expr"] for t in panel["targets"])):
            base = re.sub(r"_(bucket|sum|count)$", "", metric)
            assert base in readme, (panel["title"], base)


def test_the_readmes_name_every_rejection_and_dedup_reason() -> None:
    pages = [
        (GRAFANA / "README.md").read_text(),
        (GRAFANA.parent / "docs" / "metrics.md").read_text(),
    ]
    for page in pages:
        rejections = next(line for line in page.splitlines() if "rejections_total" in line)
        assert set(re.findall(r"`(\w+)`", rejections)) >= REJECTION_REASONS, rejections
        dedups = next(
            line for line in page.splitlines() if "dedups_total" in line and "reason" in line
        )
        assert all(reason in dedups for reason in get_args(DedupReason)), dedups


def drive_phone_calls(metrics: PhoneMetrics) -> None:
    """Two calls' worth of what a phone bridge reports, one still in progress."""
    for event in (
        CallAnswered(StreamStarted("MZ1")),
        CallAnswered(StreamStarted("MZ2")),
        FrameSkipped("unknown_event"),
        ModelAnswered(0.8),
        MarkHeard("u1.1", 0.03),
        BargedIn(0.5, 0.7),
        ModelAnswered(0.6),
        MarkHeard("u2.2", 0.02),
        CallEnded("hung_up"),
    ):
        metrics(event)


def drive_store(observer: PrometheusObserver) -> None:
    """What a session on a conversation store reports: round trips, a lease taken over."""
    for event in (
        LeaseChanged("acquired"),
        StoreOperation("begin", 0.0009),
        StoreOperation("write", 0.0012),
        StoreOperation("renew", 2.6, error="unavailable"),
        LeaseChanged("resumed", interrupted=1),
    ):
        observer.on_event(event)


def drive_turns(observer: PrometheusObserver) -> None:
    """A session of two timed turns with the service's token counts."""
    for event in (
        SessionOpened("s1"),
        TurnMeasured("s1", 0.62, 120, 40),
        TurnMeasured("s1", None, 180, 25),
        SessionClosed("s1", "closed"),
    ):
        observer.on_event(event)


def scrape(url: str) -> set[str]:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


def test_every_dashboard_query_returns_data_from_real_prometheus() -> None:
    registry = CollectorRegistry()
    observer = PrometheusObserver(registry, functions=TOOL_NAMES)
    phone = PhoneMetrics(registry)
    dashboard = load_dashboard()
    with serve(registry=registry) as endpoint:
        prometheus = PrometheusServer([f"127.0.0.1:{endpoint.port}"], scrape_interval="1s")
        try:
            prometheus.wait_ready()
            for _ in range(WORKLOAD_ROUNDS):
                anyio.run(drive_workload, [observer])
                drive_phone_calls(phone)
                drive_store(observer)
                drive_turns(observer)
                prometheus.wait_scraped_after(time.time())

            exported = scrape(endpoint.url)
            for title, expr in queries(dashboard):
                unknown = set(METRIC.findall(expr)) - exported
                assert not unknown, f"{title}: {expr} names metrics not exported: {unknown}"
                result = prometheus.query(expand(expr))
                assert result, f"{title}: no data for {expand(expr)}"
                values = [float(sample["value"][1]) for sample in result]
                assert any(not math.isnan(v) for v in values), f"{title}: only NaN for {expr}"

            for variable in dashboard["templating"]["list"]:
                if variable["type"] != "query":
                    continue
                query = variable["query"]["query"]
                match = re.fullmatch(r"label_values\((\w+)(\{[^}]*\})?,\s*(\w+)\)", query)
                assert match, query
                metric, selector, label = match.groups()
                assert metric in exported
                series = expand(metric + (selector or ""))
                values = prometheus.get(f"/api/v1/label/{label}/values", **{"match[]": series})
                if label == "function":
                    assert set(TOOL_NAMES) <= set(values), values
                else:  # job and instance: the one scraped worker
                    assert len(values) == 1, (label, values)
        finally:
            prometheus.close()
