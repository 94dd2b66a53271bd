"""``python -m benchmarks``: every benchmark, one markdown table each (``--quick``: smoke run)."""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks import (
    bench_dispatch,
    bench_phone,
    bench_sessions,
    bench_soak,
    bench_store,
    bench_turns,
    opcodes,
)
from benchmarks.server import pin_to_one_core, serve


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    for line in (
        Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []
    ):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return f"{cpu}, {os.cpu_count()} cores, Python {sys.version.split()[0]}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    options = parser.parse_args(argv)
    started = time.monotonic()
    print(f"{time.strftime('%Y-%m-%d')} · {machine()}\n")
    with tempfile.TemporaryDirectory() as directory, serve(Path(directory)) as server:
        print("\n".join(bench_sessions.run(server, options.quick)), end="\n\n", flush=True)
        calls = bench_phone.QUICK_CALLS if options.quick else bench_phone.CALLS
        seconds = bench_phone.QUICK_CALL_SECONDS if options.quick else bench_phone.CALL_SECONDS
        print("\n".join(bench_phone.calls_table(server, calls, seconds)), end="\n\n", flush=True)
        pin_to_one_core()
        print("\n".join(asyncio.run(bench_turns.run(server, options.quick))), end="\n\n")
        soak = bench_soak.QUICK if options.quick else bench_soak.SHORT
        print("\n".join(bench_soak.run(server, soak)), end="\n\n", flush=True)
    print(asyncio.run(bench_dispatch.measure_table(options.quick)))
    print("\n" + "\n".join(asyncio.run(opcodes.run(top=8))))
    print("\n" + "\n".join(bench_store.run(options.quick)), flush=True)
    phone_seconds = bench_phone.QUICK_SECONDS if options.quick else bench_phone.SECONDS
    print("\n" + "\n".join(bench_phone.table(phone_seconds)), flush=True)
    print(f"\n(measured in {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
