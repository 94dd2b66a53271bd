"""Machine instructions per tool call, counted by valgrind: the one CPU figure noise cannot move.

CPU time on a shared 2-core machine swings by half between runs, and bytecode counts
(``benchmarks.opcodes``) miss the work done in C, which is most of it: a rewrite that moves a
loop into ``map`` and ``attrgetter`` passes cuts bytecodes and can still add instructions.
This runs a loop under ``valgrind --tool=callgrind`` twice, for a short and a long run, and
divides the difference by the calls in between, so start-up and imports cancel out. The
garbage collector is off while it counts (a full collection's timing would swamp the
difference; ``profile_calls`` reports collections), and the hash seed is fixed (a random one
moved the bare loop's count by 2 %: dicts collide differently).

Loops: ``memory`` (``benchmarks.memory_loop``, livebridge and the bare loop, no sockets),
``sockets`` (livebridge and raw against the benchmark server, 8 no-op calls a turn; only the
client process is counted) and ``dispatch`` (``Dispatcher.run`` and a bare ``asyncio.gather``
on batches of 64 no-op calls, ``benchmarks.bench_dispatch``; building the batches, which both
do, is counted alone and subtracted). Needs Debian's ``valgrind``; each count takes a few seconds of
valgrind per 10 turns.

Run with ``python -m benchmarks.instructions [--turns N] [memory|sockets|dispatch ...]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from functools import partial
from pathlib import Path

CALLS = 8  # a turn, in the memory and sockets loops
BATCH = 64  # a turn of the dispatch loop
WARM_TURNS = 10
SHORT_TURNS = 10  # the short run; the long one counts ``--turns`` more
#: Each loop's variants, the one the others are compared with last.
VARIANTS = {
    "memory": ("livebridge", "bare"),
    "sockets": ("livebridge", "raw"),
    "dispatch": ("dispatcher", "gather"),
}


def count(loop: str, variant: str, turns: int) -> int:
    """Instructions of one child process running ``turns`` counted turns of ``variant``."""
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        "-m",
        "benchmarks.instructions",
        "--child",
        loop,
        variant,
        str(turns),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    match = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode or match is None:
        raise RuntimeError(f"valgrind failed on {loop} {variant}: {done.stderr[-500:]}")
    return int(match.group(1))


def per_call(loop: str, variant: str, turns: int) -> float:
    """The difference of a long and a short run: start-up and warm-up cancel out."""
    short, long = count(loop, variant, SHORT_TURNS), count(loop, variant, SHORT_TURNS + turns)
    if loop != "dispatch":
        return (long - short) / (turns * CALLS)
    calls = count(loop, "calls", SHORT_TURNS + turns) - count(loop, "calls", SHORT_TURNS)
    return (long - short - calls) / (turns * BATCH)


async def child(loop: str, variant: str, turns: int) -> None:
    """The counted process: ``WARM_TURNS`` to warm up, then ``turns`` with the GC off."""
    if loop in ("memory", "dispatch"):
        from benchmarks import bench_dispatch, memory_loop

        if loop == "memory":
            run = getattr(memory_loop, f"{variant}_loop")
        else:
            run = partial(getattr(bench_dispatch, f"{variant}_loop"), size=BATCH)
        await run(WARM_TURNS)
        gc.collect()
        gc.disable()
        await run(turns)
        return
    from benchmarks.clients import CLIENTS
    from benchmarks.server import model_name, serve

    with tempfile.TemporaryDirectory() as directory, serve(Path(directory)) as server:
        client = CLIENTS[variant]
        await client(server, model_name("throughput", CALLS, WARM_TURNS, variant), WARM_TURNS, 0)
        server.take_results()
        gc.collect()
        gc.disable()
        await client(server, model_name("throughput", CALLS, turns, variant), turns, 0)
        server.take_results()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("loops", nargs="*", default=[*VARIANTS], help="memory, sockets, dispatch")
    parser.add_argument("--turns", type=int, default=100, help="counted turns (default 100)")
    parser.add_argument(
        "--child", nargs=3, metavar=("LOOP", "VARIANT", "TURNS"), help=argparse.SUPPRESS
    )
    options = parser.parse_args(argv)
    if options.child:
        loop, variant, turns = options.child
        asyncio.run(child(loop, variant, int(turns)))
        return 0
    unknown = [loop for loop in options.loops if loop not in VARIANTS]
    if unknown:
        parser.error(f"unknown loop {unknown[0]!r}: choose memory, sockets or dispatch")
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: apt-get install valgrind, then run this again")
        return 1
    lines = ["| loop | variant | instructions per call | ratio |", "|---|---|---:|---:|"]
    for loop in options.loops:
        counts = {variant: per_call(loop, variant, options.turns) for variant in VARIANTS[loop]}
        base = counts[VARIANTS[loop][1]]
        for variant, instructions in counts.items():
            lines.append(
                f"| {loop} | {variant} | {instructions:,.0f} | {instructions / base:.2f}x |"
            )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
