"""What one long session remembers, in bytes: ``python -m benchmarks.remembered`` (``--quick``).

A ``LiveSession`` over the in-memory transport of ``benchmarks.memory_loop`` (8 calls a
``toolCall``, the real decoder, ledger, dispatcher and encoder) answers thousands of calls;
``tracemalloc`` measures what is still held after the last one (after a warm-up turn, with the
garbage collected), for small results and for 60 KB results (under ``max_result_bytes``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import tracemalloc
from collections.abc import Sequence
from typing import Any

from benchmarks.memory_loop import CALLS, MemoryConnector
from livebridge import CallPolicy, ToolRegistry
from livebridge.live.session import LiveSession
from livebridge.protocol.events import TurnComplete

#: The history's cap, and past it (as the reliability run did).
CALL_COUNTS = (4096, 4352)
SIZES = (0, 60_000)


async def remembered(calls: int, size: int) -> int:
    """Bytes still held by a session after ``calls`` calls whose results are ``size`` bytes."""
    tools = ToolRegistry()

    @tools.tool(name="work")
    async def work(i: int) -> dict[str, Any]:
        """A result of about ``size`` bytes (a fresh string each time)."""
        return {"i": i, "text": str(i) * size} if size else {"i": i}

    turns = calls // CALLS + 1  # a warm-up turn first
    held = 0
    connector = MemoryConnector(turns)
    async with LiveSession.connect(tools=tools, connector=connector) as session:
        done = 0
        async for event in session.events():
            if not isinstance(event, TurnComplete):
                continue
            done += 1
            gc.collect()
            if done == 1:
                tracemalloc.start()
                before = tracemalloc.get_traced_memory()[0]
            elif done == turns:
                held = tracemalloc.get_traced_memory()[0] - before
                tracemalloc.stop()
                break
    return held


async def table(quick: bool) -> list[str]:
    budget = CallPolicy().remembered_bytes
    lines = [
        f"| results | calls in one session | bytes held | per call (budget {budget:,}) |",
        "|---|---:|---:|---:|",
    ]
    counts = (512,) if quick else CALL_COUNTS
    for size in SIZES:
        for calls in counts:
            held = await remembered(calls, size)
            what = f"{size // 1000} KB" if size else "small"
            lines.append(f"| {what} | {calls:,} | {held:,} | {held // calls:,} |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    options = parser.parse_args(argv)
    print("\n".join(asyncio.run(table(options.quick))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
