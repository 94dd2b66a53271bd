"""Client CPU per tool call, livebridge next to the raw floor, in one run; and where it goes.

Runs the throughput scenario of ``bench_turns`` (8 no-op calls a turn) against the benchmark
server (its own process, on the other cores), alternating livebridge and raw rounds in this
process pinned to one core, and reports the CPU time (``time.process_time``: a shared, busy
machine inflates wall time far more than CPU time) per call of each, best round and median,
the ratio of the best rounds (noise only ever adds), and the garbage collections each caused.
Then the same work without sockets (``benchmarks.memory_loop``): what livebridge itself adds
per call, next to a bare loop, with far less noise. ``--profile N`` adds the N costliest
frames of one more in-memory livebridge round under ``cProfile`` (timed in CPU time; the
profiler's own overhead inflates every figure alike: read them as shares).

Run with ``python -m benchmarks.profile_calls`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import pstats
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import memory_loop
from benchmarks.clients import CLIENTS
from benchmarks.server import Server, model_name, pin_to_one_core, serve

CALLS = 8
VARIANTS = ("livebridge", "raw")


class Collections:
    """Counts the garbage collections of each generation while it is installed."""

    def __init__(self) -> None:
        self.runs = [0, 0, 0]

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "stop":
            self.runs[info["generation"]] += 1

    def __enter__(self) -> Collections:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


async def cpu_per_call(server: Server, variant: str, turns: int) -> tuple[float, list[int]]:
    """CPU µs per call of one session of ``turns`` turns, connection included; collections."""
    model = model_name("throughput", CALLS, turns, variant)
    with Collections() as collections:
        cpu = time.process_time()
        await CLIENTS[variant](server, model, turns, 0.0)
        cpu = time.process_time() - cpu
    server.take_results()
    return cpu / (CALLS * turns) * 1e6, collections.runs


async def measure(server: Server, turns: int, rounds: int) -> list[str]:
    cpu: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    runs: dict[str, list[int]] = {variant: [0, 0, 0] for variant in VARIANTS}
    for _ in range(rounds):
        for variant in VARIANTS:
            micros, collections = await cpu_per_call(server, variant, turns)
            cpu[variant].append(micros)
            runs[variant] = [a + b for a, b in zip(runs[variant], collections, strict=True)]
    lines = [
        f"| {CALLS} no-op calls a turn, {turns} turns x {rounds} | client CPU µs/call, best "
        "| median | rounds | GC runs per 1,000 calls (gen 0/1/2) |",
        "|---|---:|---:|---|---:|",
    ]
    per_thousand = 1000 / (CALLS * turns * rounds)
    for variant in VARIANTS:
        gens = "/".join(f"{n * per_thousand:.1f}" for n in runs[variant])
        rows = " ".join(f"{x:.0f}" for x in cpu[variant])
        best, median = min(cpu[variant]), statistics.median(cpu[variant])
        lines.append(f"| {variant} | {best:.0f} | {median:.0f} | {rows} | {gens} |")
    best_ratio = min(cpu["livebridge"]) / min(cpu["raw"])
    median_ratio = statistics.median(cpu["livebridge"]) / statistics.median(cpu["raw"])
    lines.append(f"\nlivebridge / raw: {best_ratio:.2f}x best, {median_ratio:.2f}x median")
    return lines


async def profile(turns: int, top: int) -> str:
    """The ``top`` frames by own CPU time of one in-memory livebridge round under cProfile."""
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    await memory_loop.livebridge_loop(turns)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


async def in_memory(turns: int, rounds: int) -> list[str]:
    best = await memory_loop.measure(turns, rounds)
    ratio, added = best["livebridge"] / best["bare"], best["livebridge"] - best["bare"]
    return [
        "",
        f"| the same without sockets, {turns} turns x {rounds} | CPU µs/call, best |",
        "|---|---:|",
        *(f"| {name} | {micros:.1f} |" for name, micros in best.items()),
        f"\nlivebridge / bare: {ratio:.2f}x (livebridge adds {added:.0f} µs per call)",
    ]


async def run(server: Server, quick: bool, top: int) -> list[str]:
    turns, rounds = (20, 1) if quick else (400, 5)
    await cpu_per_call(server, "livebridge", 10)  # warm up: imports, first connection
    lines = await measure(server, turns, rounds)
    lines += await in_memory(turns, 3 if quick else 7)
    if top:
        lines.append(await profile(turns, top))
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="top N frames")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as directory, serve(Path(directory)) as server:
        pin_to_one_core()
        print("\n".join(asyncio.run(run(server, options.quick, options.profile))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
