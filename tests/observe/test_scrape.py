"""The scrape endpoint under half-open connections: bounded threads, each silent connection
closed after its timeout, scrapes served again once they are gone."""

from __future__ import annotations

import socket
import threading
import urllib.request
from contextlib import ExitStack

import pytest
from prometheus_client import CollectorRegistry, Counter

from livebridge.observe.metrics import serve

HALF_OPEN = 200


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        text: str = response.read().decode()
        return text


def closed_by_server(connection: socket.socket) -> bool:
    """Blocks until the server closes ``connection`` (True), or 30 s pass (False)."""
    connection.settimeout(30)
    try:
        return connection.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_half_open_connections_hold_at_most_max_connections_threads(
    capfd: pytest.CaptureFixture[str],
) -> None:
    registry = CollectorRegistry()
    Counter("probe", "A probe.", registry=registry).inc()
    before = threading.active_count()
    with serve(registry=registry, max_connections=4, timeout=1.0) as server, ExitStack() as stack:
        connections = [
            stack.enter_context(socket.create_connection(("127.0.0.1", server.port), timeout=10))
            for _ in range(HALF_OPEN)
        ]
        threads = threading.active_count() - before  # the server's own thread and 4 at most
        assert threads <= 1 + 4, threads
        print(f"{HALF_OPEN} half-open connections: {threads} threads")
        assert all(closed_by_server(c) for c in connections)  # refused, or timed out
        assert "probe_total 1.0" in scrape(server.url)
    assert "Traceback" not in capfd.readouterr().err  # a silent peer is routine


def test_the_bounds_must_be_positive() -> None:
    for bad in ({"max_connections": 0}, {"timeout": 0.0}):
        try:
            serve(registry=CollectorRegistry(), **bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad} was accepted")
