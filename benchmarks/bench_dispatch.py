"""Per-call overhead of ``Dispatcher.run`` next to a bare ``asyncio.gather`` of the same handlers.

Run with ``python -m benchmarks.bench_dispatch`` (``--quick`` for a smoke run). Each batch size
is measured in alternating rounds of both variants, and the best round of each is reported, so
that noise from other processes on the machine inflates neither side. Rounds are timed in CPU
time (``time.process_time``): both sides are one busy thread, so CPU time is their cost, and a
neighbour holding the core does not count against either.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence

from livebridge import Call, CallPolicy, Dispatcher, ToolRegistry

BATCH_SIZES = (1, 8, 64)

tools = ToolRegistry()


@tools.tool(idempotent=True)
async def noop(i: int) -> None:
    """Do nothing."""


async def _gather_round(size: int, repeats: int) -> float:
    started = time.process_time()
    for _ in range(repeats):
        await asyncio.gather(*(noop(i) for i in range(size)))
    return time.process_time() - started


async def _dispatch_round(dispatcher: Dispatcher, batches: list[list[Call]]) -> float:
    started = time.process_time()
    for batch in batches:
        await dispatcher.run(batch)
    return time.process_time() - started


def batch(prefix: object, size: int) -> list[Call]:
    """``size`` no-op calls, their ids unique per ``prefix``."""
    return [Call(f"{prefix}-{i}", "noop", {"i": i}) for i in range(size)]


def dispatcher_for(size: int) -> Dispatcher:
    """A dispatcher that runs a whole batch of ``size`` at once, as ``gather`` does."""
    return Dispatcher(tools, policy=CallPolicy(max_parallel=size, max_calls_per_turn=size))


async def measure(size: int, calls_per_round: int, rounds: int) -> tuple[float, float]:
    """Best µs per call of (bare gather, dispatcher) for one batch size."""
    repeats = max(1, calls_per_round // size)
    dispatcher = dispatcher_for(size)
    best_gather = best_dispatch = float("inf")
    for round_index in range(rounds):
        batches = [batch(f"{round_index}-{r}", size) for r in range(repeats)]
        best_gather = min(best_gather, await _gather_round(size, repeats))
        best_dispatch = min(best_dispatch, await _dispatch_round(dispatcher, batches))
    per_call = 1e6 / (repeats * size)
    return best_gather * per_call, best_dispatch * per_call


async def calls_loop(turns: int, size: int) -> None:
    """Only builds the batches the two loops below run: their common cost, to subtract."""
    for turn in range(turns):
        batch(turn, size)


async def gather_loop(turns: int, size: int) -> None:
    for turn in range(turns):
        calls = batch(turn, size)
        await asyncio.gather(*(noop(call.args["i"]) for call in calls))


async def dispatcher_loop(turns: int, size: int) -> None:
    dispatcher = dispatcher_for(size)
    for turn in range(turns):
        await dispatcher.run(batch(turn, size))


async def measure_table(quick: bool) -> str:
    """The markdown table of every batch size."""
    calls_per_round, rounds = (256, 2) if quick else (20_000, 7)
    lines = [
        "| batch size | asyncio.gather µs/call | Dispatcher.run µs/call | ratio |",
        "|---:|---:|---:|---:|",
    ]
    for size in BATCH_SIZES:
        gather, dispatch = await measure(size, calls_per_round, rounds)
        lines.append(f"| {size} | {gather:.2f} | {dispatch:.2f} | {dispatch / gather:.1f}x |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    options = parser.parse_args(argv)
    print(asyncio.run(measure_table(options.quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
