"""Failover across processes: the emulator, two workers and the store (Redis or PostgreSQL),
each in its own process.

The first worker is killed (SIGKILL) while its non-idempotent handler runs; the second is
refused while the dead one's lease is live, then takes over, resumes the stored handle, and
answers the model's re-issued call ``outcome_unknown`` instead of running it again. When the
store lost the ``started`` entry (as a promoted Redis replica can), the second worker runs the
call again: with the same idempotency key, for the side effect to dedupe, and a higher fence.

They run beside the other tests: most of each is the lease (``LEASE_TTL``, scaled by the tests'
time unit) running out, and it leaves a worker started on a loaded machine room to find it held.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from tests.support.postgres_server import PostgresServer, prefix
from tests.support.redis_server import RedisServer
from tests.support.timing import seconds

ROOT = Path(__file__).resolve().parents[2]
ENV_KEYS = {"GOOGLE_GEMINI_BASE_URL", "SSL_CERT_FILE", "GEMINI_API_KEY"}
TEXT = "Book a table in Paris tonight"


class EmulatorProcess:
    """``livebridge emulator --report FILE`` in its own process."""

    def __init__(self, report: Path) -> None:
        self.report = report
        self.process = subprocess.Popen(
            [sys.executable, "-m", "livebridge.cli.main", "emulator", "--report", str(report)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GEMINI_"))}
        while not set(self.env) >= ENV_KEYS:
            name, _, value = self.process.stdout.readline().strip().partition("=")
            assert name in ENV_KEYS, name
            self.env[name] = value

    def stop(self) -> dict[str, Any]:
        """SIGTERM, then the report it wrote."""
        self.process.send_signal(signal.SIGTERM)
        self.process.communicate(timeout=seconds(60))
        report: dict[str, Any] = json.loads(self.report.read_text())
        return report

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[EmulatorProcess]:
    emu = EmulatorProcess(tmp_path / "report.json")
    try:
        yield emu
    finally:
        emu.kill()


@pytest.fixture(params=["redis", "postgres"])
def store(request: pytest.FixtureRequest) -> list[str]:
    """The store's URL, then the worker flags it needs."""
    if request.param == "postgres":
        postgres: PostgresServer = request.getfixturevalue("postgres_server")
        return [postgres.url, f"--prefix={prefix()}"]
    redis: RedisServer = request.getfixturevalue("redis_server")
    return [redis.url]


def worker(
    emu: EmulatorProcess, store: list[str], runs: Path, *flags: str
) -> subprocess.Popen[str]:
    url, *options = store
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.store_process",
            url,
            "user-42",
            TEXT,
            str(runs),
            *options,
            *flags,
        ],
        cwd=ROOT,
        env=emu.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def lines(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


@pytest.mark.slow
def test_kill_mid_call_then_the_next_worker_takes_over(
    emulator: EmulatorProcess, store: list[str], tmp_path: Path
) -> None:
    runs = tmp_path / "runs.txt"
    first = worker(emulator, store, runs, "--greet", "--hang")
    try:
        assert first.stdout is not None
        seen: list[dict[str, Any]] = []
        while not seen or seen[-1].get("event") != "running":
            line = first.stdout.readline()
            assert line, f"the first worker ended early: {first.communicate()[1]}"
            seen.append(json.loads(line))
        os.kill(first.pid, signal.SIGKILL)
    finally:
        first.kill()
        first.communicate(timeout=seconds(30))

    busy = worker(emulator, store, runs)
    _, err = busy.communicate(timeout=seconds(60))
    assert busy.returncode == 3
    assert err.splitlines()[-1].startswith("busy: conversation 'user-42' is held by")
    assert "retry after that" in err and "Traceback" not in err

    second = worker(emulator, store, runs, "--wait-lease")
    out, err = second.communicate(timeout=seconds(120))
    assert second.returncode == 0, err
    report = emulator.stop()

    (run,) = runs.read_text().splitlines()  # ran once in total
    assert run.split()[:2] == ["Paris", str(first.pid)]
    events = lines(out)
    loaded = events[0]
    assert loaded["event"] == "loaded" and loaded["handle"]
    settled = [e for e in events if e["event"] == "settled"]
    assert len(settled) == 1
    assert settled[0]["outcome"] == "rejected"
    assert settled[0]["error"]["type"] == "outcome_unknown"
    assert settled[0]["error"]["retryable"] is False
    assert events[-1] == {"event": "turn_complete"}

    transcript = report["transcript"]
    sessions = [s["id"] for s in report["sessions"]]
    assert len(sessions) == 2  # the busy worker never connected
    setups = [e for e in transcript if e["direction"] == "client" and "setup" in e["message"]]
    resumed = setups[1]["message"]["setup"]["sessionResumption"]["handle"]
    assert resumed == loaded["handle"]  # the second worker resumed the stored handle
    issued = [
        (entry["session"], call["id"])
        for entry in transcript
        if entry["direction"] == "server" and "toolCall" in entry["message"]
        for call in entry["message"]["toolCall"]["functionCalls"]
    ]
    answers = Counter(
        response["id"]
        for entry in transcript
        if entry["direction"] == "client" and "toolResponse" in entry["message"]
        for response in entry["message"]["toolResponse"]["functionResponses"]
    )
    (first_session, killed_call), (second_session, reissued) = issued  # one on each connection
    assert [first_session, second_session] == sessions
    assert answers == {reissued: 1}  # exactly one answer; the dead worker's call got none
    # The only violations are the crash we caused: the first connection died with its call
    # open, which that call never answered.
    assert [(v["kind"], v["session"]) for v in report["violations"]] == [
        ("client_crash", sessions[0]),
        ("unanswered", sessions[0]),
    ]
    assert killed_call in report["violations"][0]["message"]


def forget_journal(store: list[str]) -> None:
    """Lose the conversation's journal, as a Redis failover to a lagging replica can."""
    url, *options = store
    if url.startswith("postgresql://"):
        (tables,) = [o.partition("=")[2] for o in options if o.startswith("--prefix=")]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"UPDATE {tables}_call SET forgotten = true".encode())
    else:
        with redis.Redis.from_url(url) as client:
            assert client.delete("livebridge:{user-42}:journal") == 1


@pytest.mark.slow
def test_a_call_whose_entry_the_store_lost_runs_again_with_the_same_key(
    emulator: EmulatorProcess, store: list[str], tmp_path: Path
) -> None:
    runs = tmp_path / "runs.txt"
    first = worker(emulator, store, runs, "--greet", "--hang")
    try:
        assert first.stdout is not None
        while '"running"' not in (line := first.stdout.readline()):
            assert line, f"the first worker ended early: {first.communicate()[1]}"
        os.kill(first.pid, signal.SIGKILL)
    finally:
        first.kill()
        first.communicate(timeout=seconds(30))
    forget_journal(store)

    second = worker(emulator, store, runs, "--wait-lease")
    out, err = second.communicate(timeout=seconds(120))
    assert second.returncode == 0, err
    emulator.stop()
    settled = [e for e in lines(out) if e["event"] == "settled"]
    assert [e["outcome"] for e in settled] == ["ok"]  # nothing in the journal: it ran again
    (city1, pid1, key1, fence1), (city2, pid2, key2, fence2) = [
        line.split() for line in runs.read_text().splitlines()
    ]
    assert (city1, pid1, city2, pid2) == ("Paris", str(first.pid), "Paris", str(second.pid))
    assert key1 == key2  # the payment provider sees one request
    assert int(fence2) > int(fence1) >= 1
