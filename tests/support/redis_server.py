"""A real Redis for tests: Debian's ``redis-server`` on a free loopback port, no persistence.

Uses the ``redis-server`` package (see ``tests/support/system_packages.py``; CI installs it in
``.ci/run``). ``stop()`` and ``start()`` take the very server down and up again on the same
port, to test what a session does while its store is gone.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.prometheus_server import free_port
from tests.support.system_packages import require
from tests.support.timing import seconds

__all__ = ["RedisServer", "redis_server"]


class RedisServer:
    """One ``redis-server`` process on ``127.0.0.1:port``; ``url`` connects to it."""

    def __init__(self) -> None:
        self.binary = require("redis-server", "redis-server")
        self.directory = Path(tempfile.mkdtemp(prefix="livebridge-redis-"))
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        """Start (again) on the same port, empty, and wait until it accepts connections."""
        log = (self.directory / "redis.log").open("ab")
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + 30
        while not self._pong():
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited: {self.log()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"redis-server did not start: {self.log()}")
            time.sleep(0.02)

    def stop(self) -> None:
        """Kill the server (no goodbye to clients) and wait until it is gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=seconds(30))
        self.process = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def log(self) -> str:
        path = self.directory / "redis.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def _pong(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(16).startswith(b"+PONG")
        except OSError:
            return False


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A fresh, empty Redis for one test (``tests/conftest.py`` offers it to every test)."""
    server = RedisServer()
    try:
        yield server
    finally:
        server.close()
