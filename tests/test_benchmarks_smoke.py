"""Every benchmark runs in its smoke mode and prints its rows; speed is never checked here.

The session benchmarks run as ``python -m benchmarks ...`` in a process of their own, as users
run them: they open hundreds of sockets and event loops that must not share the test process.
"""

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks import bench_dispatch, io_wait
from benchmarks.server import serve
from tests.support.system_packages import require
from tests.support.timing import seconds

ROOT = Path(__file__).resolve().parent.parent


def run_benchmark(*argv: str) -> str:
    """The standard output of ``python -m <argv>`` run from the checkout; it must exit 0."""
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-m", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=seconds(600),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "ResourceWarning" not in done.stderr, done.stderr[-4000:]  # nothing left open
    return done.stdout


def test_bench_dispatch_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_dispatch.main(["--quick"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| batch size | asyncio.gather µs/call | Dispatcher.run µs/call")
    assert [line.split("|")[1].strip() for line in lines[2:]] == ["1", "8", "64"]
    assert all(line.rstrip().endswith("x |") for line in lines[2:])


@pytest.mark.slow
def test_profile_calls_quick_puts_livebridge_next_to_the_floor() -> None:
    out = run_benchmark("benchmarks.profile_calls", "--quick")
    assert [row[0] for row in rows(out, "| 8 no-op calls a turn")] == ["livebridge", "raw"]
    assert "livebridge / raw:" in out


async def test_an_io_handler_is_woken_by_its_backend_not_by_a_loop_timer() -> None:
    """``--handler io`` waits as a tool calling a service does: no timer on the loop, woken
    through the self-pipe once the backend's thread sees the deadline pass."""
    loop = asyncio.get_running_loop()
    begun = time.monotonic()
    waiting = asyncio.ensure_future(io_wait.io_work(7, 0.02))
    await asyncio.sleep(0)
    assert not waiting.done() and not loop._scheduled  # type: ignore[attr-defined]
    assert await asyncio.wait_for(waiting, seconds(5)) == {"i": 7}
    assert time.monotonic() - begun >= 0.02
    assert await io_wait.io_work(8, 0.0) == {"i": 8}  # no wait at all


@pytest.mark.slow
def test_critical_path_times_every_stage_of_a_turn_for_livebridge_and_raw() -> None:
    out = run_benchmark(
        "benchmarks.critical_path", "--turns", "4", "--calls", "2", "--handler", "io"
    )
    table = rows(out, "| stage (p50, µs after the bytes were read) | livebridge | raw |")
    stages = [row[0] for row in table]
    assert stages[0] == "frame received"
    assert stages[-1] == "server's turnaround above the handler"
    assert all(row[1] != "—" for row in table)  # livebridge passes through every stage
    written = stages.index("written")
    assert int(table[written][2]) > int(table[stages.index("decoded")][2])  # raw, in order


@pytest.mark.slow
def test_remembered_prints_bytes_per_call_for_small_and_large_results() -> None:
    out = run_benchmark("benchmarks.remembered", "--quick")
    table = rows(out, "| results | calls in one session")
    assert [row[:2] for row in table] == [["small", "512"], ["60 KB", "512"]]
    assert all(int(row[3].replace(",", "")) > 0 for row in table)


@pytest.mark.slow
@pytest.mark.timeout(600)  # four processes under valgrind, each importing livebridge
def test_instructions_counts_livebridge_next_to_its_floor() -> None:
    # Without ``-X dev``: under valgrind, dev mode's checks would take minutes. The memory loop
    # alone: each process costs about 15 s of valgrind, mostly the imports, and the other
    # loops count through the same code (`python -m benchmarks.instructions` runs them all).
    command = [sys.executable, "-m", "benchmarks.instructions", "memory", "--turns", "2"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    table = rows(done.stdout, "| loop | variant")
    assert [row[:2] for row in table] == [["memory", "livebridge"], ["memory", "bare"]]
    assert all(int(row[2].replace(",", "")) > 1000 for row in table)  # a call is real work
    assert table[1][3] == "1.00x"


def rows(output: str, header: str) -> list[list[str]]:
    """The cells of each row of the table whose header starts with ``header``."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    table = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        table.append([cell.strip() for cell in line.strip("|").split("|")])
    return table


@pytest.mark.slow
@pytest.mark.timeout(600)  # every benchmark in one process: about 100 s on a busy machine
def test_every_benchmark_prints_its_rows() -> None:
    """One run of ``python -m benchmarks --quick`` checks every table it prints: the suite's
    longest test, so no benchmark runs a second time on its own."""
    require("redis-server", "redis-server")
    out = run_benchmark("benchmarks", "--quick")
    turnaround = rows(out, "| turnaround")
    assert {(row[0], row[1]) for row in turnaround} == {
        (variant, k)
        for variant in ("livebridge", "sdk-serial", "sdk-gather", "raw")
        for k in ("1", "4", "8", "16")
    }
    assert all(not row[2].startswith("failed") for row in turnaround)
    throughput = rows(out, "| throughput")
    assert [row[0] for row in throughput] == ["livebridge", "sdk-serial", "sdk-gather", "raw"]
    assert all(row[4].endswith("x") and row[5].endswith("x") for row in throughput)  # vs raw
    assert [row[0] for row in rows(out, "| sessions")] == ["livebridge", "sdk", "raw"]
    assert [row[0] for row in rows(out, "| largest N")] == ["livebridge", "sdk", "raw"]
    loaded = rows(out, "| 8 x 50 ms tool turn while")
    assert [row[:2] for row in loaded] == [
        ["livebridge", "livebridge"],
        ["sdk", "sdk-gather"],
        ["raw", "raw"],
    ]
    assert [row[0] for row in rows(out, "| idle sessions")] == [
        "sdk",
        "sdk",
        "livebridge",
        "livebridge",
        "raw",
    ]
    assert [row[0] for row in rows(out, "| batch size")] == ["1", "8", "64"]
    assert "bytecodes and" in out and len(rows(out, "| function")) == 8  # the first table
    assert len(rows(out, "| elapsed s")) == 3
    assert not any(
        "failed" in cell
        for table in ("| sessions", "| throughput", "| 8 x 50 ms tool turn while")
        for row in rows(out, table)
        for cell in row
    )
    check_phone(out)
    check_soak(out)
    check_store(out)


def check_phone(out: str) -> None:
    stages = rows(out, "| stage")
    assert len(stages) == 10 and all(float(row[1]) > 0 for row in stages)
    assert "calls per core on the audio path alone: Gemini " in out
    (probe,) = rows(out, "| calls at once")
    assert probe[0] == "2" and not any("nan" in cell for cell in probe)


def check_soak(out: str) -> None:
    samples = rows(out, "| elapsed s")
    assert len(samples) == 3
    assert all(row[1] == "4" for row in samples)  # every session stayed open
    answered = [int(row[2]) for row in samples]
    assert answered == sorted(answered) and answered[-1] > answered[0] > 0
    summary = next(line for line in out.splitlines() if line.startswith("from 2 s to"))
    assert "RSS" in summary and "calls answered +" in summary
    assert summary.endswith(" 0 run twice")


def check_store(out: str) -> None:
    assert [row[0] for row in rows(out, "| store")][:3] == ["none", "MemoryStore", "RedisStore"]
    (failover,) = rows(out, "| failover: kill -9")
    assert failover[0].endswith("(median of 1)")


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs two cores to pin to",
)
def test_the_benchmark_server_keeps_every_thread_off_the_clients_core(tmp_path: Path) -> None:
    """A server thread left on the client's core preempts the client inside its sends."""
    with serve(tmp_path) as server:
        client_core = min(os.sched_getaffinity(0))
        tasks = Path(f"/proc/{server.pid}/task")
        allowed = {int(t.name): os.sched_getaffinity(int(t.name)) for t in tasks.iterdir()}
    assert len(allowed) > 1  # the server runs threads besides its loop's
    assert all(client_core not in cores for cores in allowed.values()), allowed
