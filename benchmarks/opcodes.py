"""livebridge's own work per tool call, counted in Python bytecodes: a measure noise cannot move.

Timings on a shared 2-core machine swing by a third from one run to the next; the number of
bytecodes the interpreter executes for the same work does not. This runs the in-memory loop of
``benchmarks.memory_loop`` (8 no-op calls a turn, real frames decoded and encoded, no sockets)
and the bare ``Dispatcher.run`` loop of ``benchmarks.bench_dispatch`` under a tracer that counts
every bytecode and every Python-level call, and prints them per tool call, with the functions
that execute the most. Work done in C (msgspec, dict methods) counts as the one bytecode that
calls it, so moving work into C shows here as a drop, as it should.

Run with ``python -m benchmarks.opcodes`` (``--top N`` functions, default 15).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from types import FrameType
from typing import Any

from benchmarks import memory_loop
from benchmarks.bench_dispatch import tools as dispatch_tools
from livebridge import Call, CallPolicy, Dispatcher

TURNS = 100
BATCHES, BATCH_SIZE = 20, 64


class Count:
    """Bytecodes and calls per function while installed as the trace function."""

    def __init__(self) -> None:
        self.opcodes: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any]:
        where = f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_code.co_name}"
        if event == "call":
            frame.f_trace_opcodes = True
            self.calls[where] += 1
        elif event == "opcode":
            self.opcodes[where] += 1
        return self


async def counted(work: Callable[[], Awaitable[None]]) -> Count:
    count = Count()
    sys.settrace(count)
    try:
        await work()
    finally:
        sys.settrace(None)
    return count


async def tool_path() -> tuple[Count, int]:
    await memory_loop.livebridge_loop(10)  # warm: imports, first session
    return await counted(lambda: memory_loop.livebridge_loop(TURNS)), TURNS * memory_loop.CALLS


async def dispatcher() -> tuple[Count, int]:
    policy = CallPolicy(max_parallel=BATCH_SIZE, max_calls_per_turn=BATCH_SIZE)
    dispatch = Dispatcher(dispatch_tools, policy=policy)
    batches = [
        [Call(f"{b}-{i}", "noop", {"i": i}) for i in range(BATCH_SIZE)] for b in range(BATCHES + 1)
    ]
    await dispatch.run(batches[0])  # warm

    async def work() -> None:
        for batch in batches[1:]:
            await dispatch.run(batch)

    return await counted(work), BATCHES * BATCH_SIZE


def table(title: str, count: Count, calls: int, top: int) -> list[str]:
    lines = [
        f"{title}: {sum(count.opcodes.values()) / calls:.0f} bytecodes and "
        f"{sum(count.calls.values()) / calls:.1f} Python calls per tool call",
        "",
        "| function | bytecodes per tool call | calls per tool call |",
        "|---|---:|---:|",
    ]
    for where, opcodes in count.opcodes.most_common(top):
        lines.append(f"| `{where}` | {opcodes / calls:.1f} | {count.calls[where] / calls:.2f} |")
    return lines


async def run(top: int) -> list[str]:
    lines = table("Tool path in memory (8 no-op calls a turn)", *await tool_path(), top)
    lines.append("")
    lines += table(f"Dispatcher.run, batches of {BATCH_SIZE}", *await dispatcher(), top)
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--top", type=int, default=15, help="functions listed per table")
    print("\n".join(asyncio.run(run(parser.parse_args(argv).top))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
