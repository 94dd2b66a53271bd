"""Tool turnaround and throughput: livebridge next to the usual clients, against one server.

*Turnaround*: K parallel calls of 50 ms each per turn; the emulator clocks ``toolCall`` sent ->
last ``toolResponse`` received, and the table shows p50/p99 of that minus the 50 ms handler.
*Throughput*: no-op handlers, 8 calls a turn; calls per second and client CPU per call (this
process's CPU time, which is all client: the server runs in another process, on another core).

Every figure comes from rounds that alternate the clients (turnaround: two rounds of half the
turns each, pooled; throughput: three rounds, the median and the best shown), so that a slow
spell of a shared machine does not land on one client only.

``--handler io`` has each handler wait on I/O (``benchmarks.io_wait``) instead of an
``asyncio.sleep`` timer, whose millisecond-rounded wake-up adds to the handler's time whatever
the client's loop did after starting it: the turnaround a tool that calls a service sees.

Run with ``python -m benchmarks.bench_turns`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks import clients
from benchmarks.clients import CLIENTS
from benchmarks.io_wait import io_work
from benchmarks.server import Server, model_name, pin_to_one_core, serve

PARALLEL = (1, 4, 8, 16)
HANDLER_SECONDS = 0.05
THROUGHPUT_CALLS = 8
#: The serial loop answers K calls in K x 50 ms, deterministically: fewer turns say as much.
SERIAL_TURNS = 20


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def failure(exc: BaseException) -> str:
    """The innermost error of ``exc``, in one line (a failed row must not stop the others)."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}".replace("|", "/").splitlines()[0][:80]


async def turnaround_seconds(server: Server, variant: str, calls: int, turns: int) -> list[float]:
    """Each turn's turnaround above the slowest handler, in ms."""
    model = model_name("turnaround", calls, turns, variant)
    await CLIENTS[variant](server, model, turns, HANDLER_SECONDS)
    seconds = [row["seconds"] for row in server.take_results()]
    return [(s - HANDLER_SECONDS) * 1000 for s in seconds]


async def throughput(server: Server, variant: str, turns: int) -> tuple[float, float]:
    """Calls per second and client CPU µs per call, no-op handlers, connection included."""
    model = model_name("throughput", THROUGHPUT_CALLS, turns, variant)
    wall, cpu = time.perf_counter(), time.process_time()
    await CLIENTS[variant](server, model, turns, 0.0)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    server.take_results()
    calls = THROUGHPUT_CALLS * turns
    return calls / wall, cpu / calls * 1e6


async def turnaround_table(server: Server, turns: int, rounds: int = 2) -> list[str]:
    lines = [
        "| turnaround above the slowest handler (ms) | K | p50 | p99 |",
        "|---|---:|---:|---:|",
    ]
    for calls in PARALLEL:
        samples: dict[str, list[float]] = {variant: [] for variant in CLIENTS}
        failed: dict[str, str] = {}
        for _ in range(rounds):
            for variant in CLIENTS:
                count = min(turns, SERIAL_TURNS) if variant == "sdk-serial" else turns
                if variant in failed:
                    continue
                try:
                    samples[variant] += await turnaround_seconds(
                        server, variant, calls, max(1, count // rounds)
                    )
                except Exception as exc:
                    failed[variant] = failure(exc)
        for variant, above in samples.items():
            if variant in failed:
                lines.append(f"| {variant} | {calls} | failed: {failed[variant]} | |")
                continue
            p50, p99 = statistics.median(above), percentile(above, 0.99)
            lines.append(f"| {variant} | {calls} | {p50:.2f} | {p99:.2f} |")
    return lines


async def throughput_table(server: Server, turns: int, rounds: int) -> list[str]:
    rates: dict[str, list[float]] = {variant: [] for variant in CLIENTS}
    cpus: dict[str, list[float]] = {variant: [] for variant in CLIENTS}
    failed: dict[str, str] = {}
    for _ in range(rounds):
        for variant in CLIENTS:
            if variant in failed:
                continue
            try:
                rate, cpu = await throughput(server, variant, turns)
            except Exception as exc:
                failed[variant] = failure(exc)
                continue
            rates[variant].append(rate)
            cpus[variant].append(cpu)
    lines = [
        f"| throughput, no-op handlers, 8 calls a turn ({rounds} rounds) | calls/s, median "
        "| client CPU µs/call, median | best | median / raw's | best / raw's |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    raw = cpus["raw"] if "raw" not in failed else []
    for variant in CLIENTS:
        if variant in failed:
            lines.append(f"| {variant} | failed: {failed[variant]} | | | | |")
            continue
        median, best = statistics.median(cpus[variant]), min(cpus[variant])
        ratios = (
            f"{median / statistics.median(raw):.2f}x | {best / min(raw):.2f}x" if raw else " | "
        )
        lines.append(
            f"| {variant} | {statistics.median(rates[variant]):,.0f} | {median:.0f} | {best:.0f}"
            f" | {ratios} |"
        )
    return lines


#: What a handler waits on: a loop timer, or I/O (``benchmarks.io_wait``).
HANDLERS = {"timer": clients.work, "io": io_work}


def use_handler(kind: str) -> None:
    """Every client's handlers wait on ``kind`` from now on."""
    clients.work = HANDLERS[kind]


async def run(server: Server, quick: bool, turns: int | None = None) -> list[str]:
    turns = turns or (4 if quick else 200)
    lines = await turnaround_table(server, turns)
    lines.append("")
    lines += await throughput_table(server, 20 if quick else 400, 1 if quick else 3)
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument(
        "--handler", choices=sorted(HANDLERS), default="timer", help="what a handler waits on"
    )
    options = parser.parse_args(argv)
    use_handler(options.handler)
    with tempfile.TemporaryDirectory() as directory, serve(Path(directory)) as server:
        pin_to_one_core()
        print("\n".join(asyncio.run(run(server, options.quick))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
