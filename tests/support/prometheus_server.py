"""A real Prometheus server for tests: own port on loopback, own config and data directory.

Uses Debian's ``prometheus`` package (see ``tests/support/system_packages.py``; the packaged
service is never started, so no system daemon is left on :9090).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.support.system_packages import require
from tests.support.timing import seconds

POLL = 0.1  # seconds between polls of Prometheus's own status API


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class PrometheusServer:
    """One Prometheus process scraping ``targets`` every ``scrape_interval``."""

    def __init__(self, targets: list[str], scrape_interval: str = "1s") -> None:
        self.binary = require("prometheus", "prometheus")
        self.directory = Path(tempfile.mkdtemp(prefix="livebridge-prometheus-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = self.directory / "prometheus.yml"
        config.write_text(
            "global:\n"
            f"  scrape_interval: {scrape_interval}\n"
            f"  scrape_timeout: {scrape_interval}\n"
            "scrape_configs:\n"
            "  - job_name: livebridge\n"
            f"    static_configs: [{{targets: {json.dumps(targets)}}}]\n"
        )
        self.log = self.directory / "prometheus.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    self.binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={self.directory / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def get(self, path: str, **params: str) -> Any:
        """GET an API path; returns the decoded JSON ``data``."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=10) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Evaluate an instant PromQL query; returns its result vector."""
        data = self.get("/api/v1/query", query=expr)
        result: list[dict[str, Any]] = data["result"]
        return result

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until Prometheus answers ``/-/ready``."""
        self._until(self._ready, timeout, "Prometheus did not become ready")

    def wait_scraped_after(self, moment: float, timeout: float = 60.0) -> None:
        """Wait until every target was scraped successfully after the epoch time ``moment``."""

        def done() -> bool:
            targets = self.get("/api/v1/targets")["activeTargets"]
            return bool(targets) and all(
                t["health"] == "up" and _epoch(t["lastScrape"]) > moment for t in targets
            )

        self._until(done, timeout, "targets were not scraped")

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=5) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def _until(self, condition: Any, timeout: float, message: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{message}: {self.log.read_text()[-2000:]}")
            time.sleep(POLL)

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=seconds(30))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)


def _epoch(rfc3339: str) -> float:
    """Prometheus's ``lastScrape`` (RFC 3339 with nanoseconds) as epoch seconds."""
    head, _, rest = rfc3339.partition(".")
    fraction = "".join(c for c in rest if c.isdigit())
    zone = rest[len(fraction) :] if fraction else rest
    stamp = datetime.fromisoformat(head + (zone.replace("Z", "+00:00") or "+00:00"))
    return stamp.timestamp() + (float(f"0.{fraction}") if fraction else 0.0)
