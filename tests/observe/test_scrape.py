"""The scrape endpoint under slowloris: hundreds of sockets that idle, or send a request a byte
at a time, never lock a scrape out; each is cut at its deadline, and a huge head is refused."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.metrics_core import Metric

from livebridge.observe.scrape import RENDERS, Request, parse_head, serve
from tests.support.prometheus_server import PrometheusServer
from tests.support.timing import seconds

ATTACKERS = 300  # a third silent, a third with half a request line, a third trickling headers


def registry() -> CollectorRegistry:
    probes = CollectorRegistry()
    Counter("probe", "A probe.", registry=probes).inc()
    return probes


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        text: str = response.read().decode()
        return text


def closed_by_server(connection: socket.socket, within: float = 15.0) -> bool:
    """Blocks until the server closes ``connection`` (True), or ``within`` s pass (False)."""
    connection.settimeout(within)
    try:
        while connection.recv(4096):
            pass  # an answer (e.g. 400) before the close
        return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


#: What each kind of attacker sent so far: nothing, half a request line, a head without its end.
OPENINGS = (b"", b"GET /metr", b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")


@dataclass
class Attack:
    """The attackers' sockets (replaced in place when ``reconnect``) and how often one was cut."""

    sockets: list[socket.socket]
    reconnects: int = 0


def attacker(port: int, index: int, count: int) -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", port), timeout=10)
    connection.sendall(OPENINGS[3 * index // count])
    return connection


def cut(connection: socket.socket) -> bool:
    """Whether the server closed ``connection`` (without waiting)."""
    try:
        return connection.recv(4096, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


@contextmanager
def slowloris(port: int, count: int = ATTACKERS, *, reconnect: bool = False) -> Iterator[Attack]:
    """``count`` connections that never complete a request: silent ones, ones stuck in the
    request line, and ones that trickle a header byte every 0.2 s until the block ends; with
    ``reconnect``, one the server cuts is opened again (the attack never lets up)."""
    stop = threading.Event()
    attack = Attack([attacker(port, index, count) for index in range(count)])

    def keep_up() -> None:
        while not stop.wait(0.2):
            for index, connection in enumerate(attack.sockets):
                if reconnect and cut(connection):
                    connection.close()
                    with contextlib.suppress(OSError):  # the backlog is full: next round
                        attack.sockets[index] = attacker(port, index, count)
                        attack.reconnects += 1
                elif 3 * index // count == 2:
                    with contextlib.suppress(OSError):  # cut by the server, as it should be
                        connection.send(b"a")

    thread = threading.Thread(target=keep_up, daemon=True)
    thread.start()
    try:
        yield attack
    finally:
        stop.set()
        thread.join()
        for connection in attack.sockets:
            connection.close()


def test_a_scrape_succeeds_during_a_slowloris_attack_that_never_lets_up() -> None:
    with (
        serve(registry=registry()) as server,
        slowloris(server.port, reconnect=True) as attack,
    ):
        latencies = []
        for _ in range(10):
            started = time.perf_counter()
            assert "probe_total 1.0" in scrape(server.url)
            latencies.append(time.perf_counter() - started)
            assert server.connections <= 256
        print(
            f"{ATTACKERS} slowloris sockets ({attack.reconnects} reopened): scrapes took"
            f" {max(latencies) * 1000:.1f} ms at most"
        )
        assert max(latencies) < 3.0, latencies


@pytest.mark.slow
def test_prometheus_scrapes_every_time_during_a_slowloris_attack() -> None:
    with (
        serve(registry=registry()) as server,
        slowloris(server.port, reconnect=True) as attack,
    ):
        prometheus = PrometheusServer([f"127.0.0.1:{server.port}"])
        try:
            prometheus.wait_ready()
            deadline = time.monotonic() + seconds(60)
            while (
                not (scrapes := prometheus.query("count_over_time(up[5m])"))
                or float(scrapes[0]["value"][1]) < 5
            ):
                assert time.monotonic() < deadline, "Prometheus did not scrape 5 times"
                time.sleep(0.5)
            [worst] = prometheus.query("min_over_time(up[5m])")
            [slowest] = prometheus.query("max_over_time(scrape_duration_seconds[5m])")
            probes = prometheus.query("probe_total")
        finally:
            prometheus.close()
        print(
            f"Prometheus during {ATTACKERS} slowloris sockets ({attack.reconnects} reopened):"
            f" {scrapes[0]['value'][1]} scrapes, slowest {float(slowest['value'][1]) * 1000:.1f} ms"
        )
        assert worst["value"][1] == "1", "a scrape failed"  # up is 0 for a failed scrape
        assert [probe["value"][1] for probe in probes] == ["1"]


def test_more_attackers_than_connections_push_out_the_oldest_not_the_scrape() -> None:
    with (
        serve(registry=registry(), max_connections=8) as server,
        slowloris(server.port, 60, reconnect=True),
    ):
        for _ in range(5):
            assert "probe_total 1.0" in scrape(server.url)
            assert server.connections <= 8


def test_trickled_headers_are_cut_at_the_deadline_however_many_bytes_come() -> None:
    with serve(registry=registry(), timeout=1.0) as server, slowloris(server.port, 3) as attack:
        started = time.monotonic()
        assert closed_by_server(attack.sockets[-1])  # the trickling one: a byte every 0.2 s
        assert time.monotonic() - started < seconds(10)


def test_silent_connections_take_no_thread_and_are_closed_after_the_timeout(
    capfd: pytest.CaptureFixture[str],
) -> None:
    before = threading.active_count()
    with serve(registry=registry(), timeout=1.0) as server, ExitStack() as stack:
        connections = [
            stack.enter_context(socket.create_connection(("127.0.0.1", server.port), timeout=10))
            for _ in range(ATTACKERS)
        ]
        threads = threading.active_count() - before
        assert threads <= 1, threads  # the server's loop thread, whatever the connections
        assert all(closed_by_server(c) for c in connections)
        assert "probe_total 1.0" in scrape(server.url)
    assert "Traceback" not in capfd.readouterr().err  # a silent peer is routine


class Stalled:
    """A collector that blocks every collect until released, counting them."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.entered = threading.Event()
        self.started = 0

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        self.started += 1
        self.entered.set()
        self.released.wait(30)
        yield from registry().collect()


def test_a_flood_of_complete_requests_renders_at_most_two_answers_and_queues_no_more() -> None:
    stalled = Stalled()
    probes = CollectorRegistry()
    probes.register(stalled)
    with serve(registry=probes, timeout=1.0) as server, ExitStack() as stack:
        flood = [
            stack.enter_context(socket.create_connection(("127.0.0.1", server.port), timeout=10))
            for _ in range(30)
        ]
        for connection in flood:
            connection.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert all(closed_by_server(c) for c in flood)  # every one cut at its deadline
        assert stalled.started <= RENDERS, stalled.started  # the rest never cost a render
        stalled.released.set()
        assert "probe_total 1.0" in scrape(server.url)
        assert stalled.started <= RENDERS + 1, stalled.started  # cut requests left no work


def test_close_does_not_wait_for_a_collector_that_hangs() -> None:
    stalled = Stalled()
    probes = CollectorRegistry()
    probes.register(stalled)
    server = serve(registry=probes)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as connection:
            connection.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            assert stalled.entered.wait(10)
            started = time.monotonic()
            server.close()
            assert time.monotonic() - started < seconds(5)  # not the 30 s the collector hangs
            assert closed_by_server(connection)
    finally:
        stalled.released.set()
        server.close()


def test_a_huge_request_head_is_refused_without_reading_it_all() -> None:
    with serve(registry=registry()) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as connection:
            headers = b"".join(b"X-Pad-%d: %s\r\n" % (i, b"a" * 1000) for i in range(60))
            connection.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n")
            assert connection.recv(64).startswith(b"HTTP/1.1 431 ")
        assert "probe_total 1.0" in scrape(server.url)


def test_a_bad_request_is_answered_400_and_other_methods_405() -> None:
    with serve(registry=registry()) as server:
        for request, status in [
            (b"nonsense\r\n\r\n", b"400"),
            (b"GET /metrics SPDY/3\r\n\r\n", b"505"),
            (b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n", b"405"),
        ]:
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as connection:
                connection.sendall(request)
                assert connection.recv(64).split(b" ")[1] == status, request


def test_parse_head() -> None:
    head = (
        b"GET /metrics?name%5B%5D=probe_total HTTP/1.1\r\nHost: x\r\nAccept:  text/plain \r\n\r\n"
    )
    assert parse_head(head) == Request(
        "GET", "/metrics", "name%5B%5D=probe_total", {"host": "x", "accept": "text/plain"}
    )
    assert parse_head(b"GET /metrics\r\n\r\n") == 400
    assert parse_head(b"GET metrics HTTP/1.1\r\n\r\n") == 400
    assert parse_head(b"GET / HTTP/1.1\r\nNo colon\r\n\r\n") == 400
    assert parse_head(b"GET / HTTP/1.1\r\nName : value\r\n\r\n") == 400
    assert parse_head(b"GET / HTTP/2\r\n\r\n") == 505


def test_the_bounds_must_be_positive() -> None:
    for bad in ({"max_connections": 0}, {"timeout": 0.0}):
        try:
            serve(registry=CollectorRegistry(), **bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad} was accepted")
