"""A real PostgreSQL for tests: Debian's binaries, a scratch cluster on a free loopback port.

Uses the ``postgresql`` package (``/usr/lib/postgresql/<version>/bin``; CI installs it in
``.ci/run``). ``initdb`` and ``postgres`` refuse to run as root, so as root (CI, containers)
the cluster belongs to the ``postgres`` user the package creates. ``initdb`` runs once per
process: each cluster starts from a copy of that pristine one. ``pause()`` (SIGSTOP) freezes
the postmaster and every backend (each backend is a session of its own: signalled one by one),
and ``kill()`` is a crash. ``standby()`` makes a streaming replica with ``pg_basebackup -R``.

``postgres_server`` is one cluster for a whole test session; tests keep apart by table prefix
(``prefix()``), never by a cluster each.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support.prometheus_server import free_port
from tests.support.system_packages import require
from tests.support.timing import seconds

__all__ = ["PostgresServer", "postgres_server", "prefix"]

_counter = itertools.count(1)
_pristine: list[Path] = []


def prefix() -> str:
    """A table prefix no other test of this process uses."""
    return f"t{os.getpid()}_{next(_counter)}"


def binaries() -> Path:
    """Debian's PostgreSQL binaries (the newest version installed)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not found:
        require("pg_ctlcluster", "postgresql")
        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not found:  # pragma: no cover - depends on the machine
        message = "PostgreSQL's server binaries are missing: apt-get install postgresql"
        if os.environ.get("CI") == "true":
            pytest.fail(message)  # CI must never pass by skipping
        pytest.skip(message)
    return found[-1].parent


def _as_postgres() -> dict[str, Any]:
    """``subprocess`` options that drop root to the ``postgres`` user (nothing otherwise)."""
    if os.geteuid() != 0:
        return {}
    return {"user": "postgres", "group": "postgres", "extra_groups": []}


def _own(path: Path) -> None:
    if os.geteuid() == 0:
        entry = pwd.getpwnam("postgres")
        for root, dirs, files in os.walk(path):
            for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
                os.chown(name, entry.pw_uid, entry.pw_gid)


def _scratch(kind: str) -> Path:
    directory = Path(tempfile.mkdtemp(prefix=f"livebridge-{kind}-"))
    directory.chmod(0o755)
    _own(directory)
    return directory


def _pristine_cluster() -> Path:
    """One ``initdb`` per process (a few seconds); clusters are copies of it."""
    if not _pristine:
        home = _scratch("pg-template")
        data = home / "data"
        subprocess.run(
            [
                str(binaries() / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "-A",
                "trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ],
            check=True,
            capture_output=True,
            **_as_postgres(),
        )
        _pristine.append(data)
    return _pristine[0]


class PostgresServer:
    """One ``postgres`` on ``127.0.0.1:port`` with its own data directory; ``url`` connects."""

    def __init__(self, data: Path | None = None, *, settings: dict[str, str] | None = None) -> None:
        self.bin = binaries()
        self.home = _scratch("pg")
        self.data = self.home / "data"
        if data is None:
            shutil.copytree(_pristine_cluster(), self.data, symlinks=True)
            _own(self.data)
        else:
            data.rename(self.data)
        self.data.chmod(0o700)
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.settings = {
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": str(self.home),
            "fsync": "off",  # processes die in these tests, never the machine
            "full_page_writes": "off",
            "shared_buffers": "16MB",
            "max_connections": "60",
            **(settings or {}),
        }
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        """Start (again) on the same port, and wait until it accepts connections."""
        options = [f"--{name.replace('_', '-')}={value}" for name, value in self.settings.items()]
        with (self.home / "postgres.log").open("ab") as log:
            self.process = subprocess.Popen(
                [str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port), *options],
                stdout=log,
                stderr=subprocess.STDOUT,
                **_as_postgres(),
            )
        deadline = time.monotonic() + 60
        while not self.ready():
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited: {self.log()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"postgres did not start: {self.log()}")
            time.sleep(0.05)

    def ready(self) -> bool:
        try:
            with psycopg.connect(self.url, connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def sql(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        """Run one statement (autocommit) and return its rows."""
        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            cursor = conn.execute(query.encode() if not args else query, args or None)
            return cursor.fetchall() if cursor.description else []

    def pause(self) -> None:
        """Freeze the server, every backend included (SIGSTOP, the postmaster first)."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def kill(self) -> None:
        """Crash it (SIGKILL to every process of the server) and wait until it is gone."""
        if self.process is not None and self.process.poll() is None:
            self._signal(signal.SIGKILL)
            self.process.wait(timeout=seconds(30))
        self.process = None

    def _signal(self, number: int) -> None:
        assert self.process is not None
        postmaster = self.process.pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(postmaster, number)  # first: it forks no new backend meanwhile
        for pid in _children(postmaster):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, number)

    def standby(self, name: str = "standby") -> PostgresServer:
        """A streaming replica of this server (``pg_basebackup -R``), started and streaming."""
        home = _scratch("pg-base")
        subprocess.run(
            [
                str(self.bin / "pg_basebackup"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-D",
                str(home / "data"),
                "-R",
                "-X",
                "stream",
                "--no-sync",
                "-d",
                f"application_name={name}",
            ],
            check=True,
            capture_output=True,
            **_as_postgres(),
        )
        replica = PostgresServer(home / "data")
        shutil.rmtree(home, ignore_errors=True)
        return replica

    def promote(self) -> None:
        """Make this standby the primary (waits until it accepts writes)."""
        self.sql("SELECT pg_promote(true, 60)")

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.home, ignore_errors=True)

    def log(self) -> str:
        path = self.home / "postgres.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""


def _children(parent: int) -> list[int]:
    """The processes whose parent is ``parent`` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            found.append(int(stat.parent.name))
    return found


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL for the test session (keep tests apart with ``prefix()``)."""
    server = PostgresServer()
    try:
        yield server
    finally:
        server.close()
