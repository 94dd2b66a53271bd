"""What a conversation store costs per call, and how long a failover takes.

Run with ``python -m benchmarks.bench_store`` (``--quick`` for a smoke run); it starts its own
``redis-server`` on a free loopback port (Debian's ``redis-server`` package).

1. **Journal and handle overhead.** One non-idempotent call per batch through a ``Dispatcher``
   whose session holds a conversation (``StoreConnector.run`` running: lease heartbeat and the
   background writer) and receives a new handle after every call, as a live conversation does.
   The turnaround (batch in → answer out) is measured with no store, a ``MemoryStore`` and a
   ``RedisStore``, alternating, in one run; the table shows p50 and p99 and what the store adds.
   Only the ``started`` entry is on the answer's path; the settled entry and the handle are
   written behind it, and their cost shows up only as load on the same event loop.
2. **Failover.** The emulator and two workers (``tests/support/store_process.py``) in
   processes of their own: the first is killed (SIGKILL) while its handler runs; the second,
   started at once, waits for the lease to lapse, resumes the stored handle and answers the
   re-issued call. Measured: kill → that answer, with the lease TTL it includes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from livebridge import Call, Dispatcher, ToolRegistry
from livebridge.store import MemoryStore, RedisStore, Store
from livebridge.store.connector import StoreConnector

ROOT = Path(__file__).resolve().parent.parent
TEXT = "Book a table in Paris tonight"
ENV_KEYS = {"GOOGLE_GEMINI_BASE_URL", "SSL_CERT_FILE", "GEMINI_API_KEY"}

tools = ToolRegistry()


@tools.tool
async def book(n: int) -> int:
    """Not idempotent: journaled before it runs."""
    return n


class _NoInner:
    """The journal path needs no Live connection: the connector is never opened here."""

    def protocol(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def open(self, handle: str | None) -> Any:
        raise NotImplementedError


async def _turnarounds(store: Store | None, calls: int, tag: str) -> list[float]:
    """Seconds from ``run()`` to the answer, one call per batch, ``calls`` times."""
    seconds: list[float] = []
    async with anyio.create_task_group() as tg:
        journal = None
        connector = None
        if store is not None:
            connector = StoreConnector(_NoInner(), store, f"bench-{tag}")
            await tg.start(connector.run)
            journal = connector.journal
        dispatcher = Dispatcher(tools, journal=journal)
        for i in range(calls):
            started = time.perf_counter()
            await dispatcher.run([Call(f"{tag}-{i}", "book", {"n": i})])
            seconds.append(time.perf_counter() - started)
            if connector is not None:
                connector.new_handle(f"handle-{tag}-{i}")
        tg.cancel_scope.cancel()
    return seconds


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def overhead_table(redis_url: str, quick: bool) -> list[str]:
    calls, rounds = (50, 2) if quick else (2000, 5)
    samples: dict[str, list[float]] = {"none": [], "MemoryStore": [], "RedisStore": []}
    redis = RedisStore(redis_url)
    try:
        for round_index in range(rounds):
            for name in samples:
                store: Store | None = {"none": None, "MemoryStore": MemoryStore()}.get(name, redis)
                samples[name] += await _turnarounds(store, calls, f"{name}-{round_index}")
    finally:
        await redis.aclose()
    floor = await _ping_floor(redis_url, calls * rounds)
    base50, base99 = _percentile(samples["none"], 0.5), _percentile(samples["none"], 0.99)
    lines = [
        "| store | p50 µs | p99 µs | added p50 µs | added p99 µs |",
        "|---|---|---|---|---|",
    ]
    for name, values in samples.items():
        p50, p99 = _percentile(values, 0.5), _percentile(values, 0.99)
        lines.append(
            f"| {name} | {p50 * 1e6:.0f} | {p99 * 1e6:.0f} | {(p50 - base50) * 1e6:.0f} |"
            f" {(p99 - base99) * 1e6:.0f} |"
        )
    p50, p99 = _percentile(floor, 0.5), _percentile(floor, 0.99)
    lines.append(
        f"| (one bare PING round trip, for scale) | {p50 * 1e6:.0f} | {p99 * 1e6:.0f} | | |"
    )
    return lines


async def _ping_floor(redis_url: str, count: int) -> list[float]:
    """Round trips of a bare ``PING`` on a plain asyncio socket: the machine's floor."""
    host, _, port = redis_url.removeprefix("redis://").partition("/")[0].partition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    seconds = []
    for _ in range(count):
        started = time.perf_counter()
        writer.write(b"PING\r\n")
        await reader.readline()
        seconds.append(time.perf_counter() - started)
    writer.close()
    await writer.wait_closed()
    return seconds


def _emulator(report: Path) -> tuple[subprocess.Popen[str], dict[str, str]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "livebridge.cli.main", "emulator", "--report", str(report)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GEMINI_"))}
    while not set(env) >= ENV_KEYS:
        name, _, value = process.stdout.readline().strip().partition("=")
        env[name] = value
    return process, env


def _worker(env: dict[str, str], redis_url: str, runs: Path, conv: str, *flags: str) -> Any:
    command = [
        sys.executable,
        "-m",
        "tests.support.store_process",
        redis_url,
        conv,
        TEXT,
        str(runs),
    ]
    return subprocess.Popen(
        [*command, *flags], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )


def failover_seconds(redis_url: str, directory: Path, conv: str) -> float:
    """Seconds from killing a worker mid-call to the next worker's answer of the re-issue."""
    emulator, env = _emulator(directory / f"{conv}.json")
    runs = directory / f"{conv}.runs"
    try:
        first = _worker(env, redis_url, runs, conv, "--greet", "--hang")
        assert first.stdout is not None
        for line in first.stdout:
            if json.loads(line).get("event") == "running":
                break
        os.kill(first.pid, signal.SIGKILL)
        killed = time.monotonic()
        first.communicate()
        second = _worker(env, redis_url, runs, conv, "--wait-lease")
        assert second.stdout is not None
        answered = None
        for line in second.stdout:
            if json.loads(line).get("event") == "settled":
                answered = time.monotonic()
        second.communicate()
        assert answered is not None and second.returncode == 0, "the second worker failed"
        return answered - killed
    finally:
        emulator.send_signal(signal.SIGTERM)
        emulator.communicate()


def run(quick: bool) -> list[str]:
    """Both tables, against a redis-server of its own."""
    from tests.support.redis_server import RedisServer

    pinned = os.sched_getaffinity(0)  # python -m benchmarks pins itself to one core by now:
    os.sched_setaffinity(0, range(os.cpu_count() or 1))  # Redis and workers get every core
    server = RedisServer()
    try:
        lines = ["Journal + handle overhead per call (one non-idempotent call per batch):", ""]
        lines += asyncio.run(overhead_table(server.url, quick))
        times = 1 if quick else 3
        with tempfile.TemporaryDirectory() as directory:
            failovers = [
                failover_seconds(server.url, Path(directory), f"f{i}") for i in range(times)
            ]
        from tests.support.store_process import LEASE_TTL

        lines += [
            "",
            "| failover: kill -9 → first answer on the new worker | lease TTL |",
            "|---|---|",
            f"| {statistics.median(failovers):.2f} s (median of {times}) | {LEASE_TTL:g} s |",
        ]
        return lines
    finally:
        server.close()
        os.sched_setaffinity(0, pinned)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    print("\n".join(run(parser.parse_args(argv).quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
