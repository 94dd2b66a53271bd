"""Prometheus metrics of the process's MCP server connections, labelled with the server.

A connection is shared by every session of the process, so its counts are not any session's
events: this collector reads them from the connections when Prometheus scrapes.
``PrometheusObserver`` registers it with its registry; ``server`` is the label an
``MCPServer`` was given (its command or URL), bounded by the servers the app configured.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from livebridge.mcp.connection import connections


class MCPCollector(Collector):
    """``livebridge_mcp_restarts_total`` (stdio servers started again after they ended),
    ``livebridge_mcp_reconnects_total`` (HTTP sessions initialized again),
    ``livebridge_mcp_bad_messages_total`` (replies that were not JSON-RPC) and
    ``livebridge_mcp_up`` (1 while the server's tools can be called)."""

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        restarts = CounterMetricFamily(
            "livebridge_mcp_restarts",
            "MCP stdio servers started again after their process ended.",
            labels=["server"],
        )
        reconnects = CounterMetricFamily(
            "livebridge_mcp_reconnects",
            "MCP streamable-HTTP sessions initialized again (forgotten or dropped).",
            labels=["server"],
        )
        bad = CounterMetricFamily(
            "livebridge_mcp_bad_messages",
            "Messages from MCP servers that were not readable JSON-RPC.",
            labels=["server"],
        )
        up = GaugeMetricFamily(
            "livebridge_mcp_up", "1 while an MCP server's tools can be called.", labels=["server"]
        )
        totals: dict[str, list[float]] = {}  # servers of one name add up
        for connection in connections():
            total = totals.setdefault(connection.server.name, [0.0, 0.0, 0.0, 0.0])
            total[0] += connection.restarts
            total[1] += connection.reconnects
            total[2] += connection.bad_messages
            total[3] = max(total[3], 1.0 if connection.state == "ready" else 0.0)
        for name, (restarted, reconnected, unreadable, ready) in sorted(totals.items()):
            restarts.add_metric([name], restarted)
            reconnects.add_metric([name], reconnected)
            bad.add_metric([name], unreadable)
            up.add_metric([name], ready)
        yield from (restarts, reconnects, bad, up)

    def describe(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        return self.collect()
