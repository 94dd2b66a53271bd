"""Tool turnaround and throughput: livebridge next to the usual clients, against one server.

*Turnaround*: K parallel calls of 50 ms each per turn; the emulator clocks ``toolCall`` sent ->
last ``toolResponse`` received, and the table shows p50/p99 of that minus the 50 ms handler.
*Throughput*: no-op handlers, 8 calls a turn; calls per second and client CPU per call (this
process's CPU time, which is all client: the server runs in another process, on another core).

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

from benchmarks.clients import CLIENTS
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


async def turnaround(server: Server, variant: str, calls: int, turns: int) -> tuple[float, float]:
    """p50 and p99 (ms) of the turnaround above the slowest handler."""
    model = model_name("turnaround", calls, turns, variant)
    await CLIENTS[variant](server, model, turns, HANDLER_SECONDS)
    seconds = [row["seconds"] for row in server.take_results()]
    above = [(s - HANDLER_SECONDS) * 1000 for s in seconds]
    return statistics.median(above), percentile(above, 0.99)


async def throughput(server: Server, variant: str, turns: int) -> tuple[float, float]:
    """Calls per second and client CPU µs per call, no-op handlers, connection included."""
    model = model_name("throughput", THROUGHPUT_CALLS, turns, variant)
    wall, cpu = time.perf_counter(), time.process_time()
    await CLIENTS[variant](server, model, turns, 0.0)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    server.take_results()
    calls = THROUGHPUT_CALLS * turns
    return calls / wall, cpu / calls * 1e6


async def run(server: Server, quick: bool, turns: int | None = None) -> list[str]:
    turns = turns or (3 if quick else 200)
    lines = [
        "| turnaround above the slowest handler (ms) | K | p50 | p99 |",
        "|---|---:|---:|---:|",
    ]
    for calls in PARALLEL:
        for variant in CLIENTS:
            count = min(turns, SERIAL_TURNS) if variant == "sdk-serial" else turns
            try:
                p50, p99 = await turnaround(server, variant, calls, count)
            except Exception as exc:
                lines.append(f"| {variant} | {calls} | failed: {failure(exc)} | |")
                continue
            lines.append(f"| {variant} | {calls} | {p50:.2f} | {p99:.2f} |")
    lines += [
        "",
        "| throughput, no-op handlers, 8 calls a turn | calls/s | client CPU µs/call |",
        "|---|---:|---:|",
    ]
    throughput_turns = 20 if quick else 400
    for variant in CLIENTS:
        try:
            rate, cpu = await throughput(server, variant, throughput_turns)
        except Exception as exc:
            lines.append(f"| {variant} | failed: {failure(exc)} | |")
            continue
        lines.append(f"| {variant} | {rate:,.0f} | {cpu:.0f} |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as directory, serve(Path(directory)) as server:
        pin_to_one_core()
        print("\n".join(asyncio.run(run(server, options.quick))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
