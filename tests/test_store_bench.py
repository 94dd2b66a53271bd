"""The store benchmark runs in its smoke mode and prints both tables; speed is not checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.system_packages import require

ROOT = Path(__file__).resolve().parent.parent


def test_bench_store_prints_overhead_and_failover() -> None:
    require("redis-server", "redis-server")
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-m", "benchmarks.bench_store", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "ResourceWarning" not in done.stderr, done.stderr[-4000:]
    lines = done.stdout.splitlines()
    names = [line.split("|")[1].strip() for line in lines if line.startswith("| ")]
    assert names[:4] == ["store", "none", "MemoryStore", "RedisStore"]
    assert any(line.startswith("| failover: kill -9") for line in lines)
    failover = lines[lines.index(next(x for x in lines if x.startswith("| failover"))) + 2]
    assert failover.split("|")[1].strip().endswith("(median of 1)")
