"""Drive the voice-agent example from tests: the server as a subprocess, browsers as websockets."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import signal
import struct
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Origin

from tests.support.timing import seconds

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "examples" / "voice_agent" / "server.py"
ARTIFACTS = ROOT / "artifacts"
INPUT_RATE = 16_000
OUTPUT_RATE = 24_000
FRAME_SECONDS = 0.04
FRAME_BYTES = int(INPUT_RATE * FRAME_SECONDS) * 2
_READY = re.compile(r"open (http://\S+/)")


def tone(seconds: float, rate: int = INPUT_RATE, *, loud: bool = True) -> bytes:
    """PCM16 mono: a loud 220 Hz tone (taken for speech), or silence."""
    count = int(seconds * rate)
    amplitude = 12_000 if loud else 0
    return struct.pack(
        f"<{count}h",
        *(int(amplitude * math.sin(2 * math.pi * 220 * i / rate)) for i in range(count)),
    )


@dataclass
class ServerProcess:
    """The example server running in its own process."""

    process: subprocess.Popen[str]
    url: str
    metrics_url: str
    output: list[str] = field(default_factory=list)

    @property
    def ws_url(self) -> str:
        return self.url.replace("http://", "ws://", 1) + "ws"

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.url + "stats", timeout=10) as response:
            stats: dict[str, Any] = json.load(response)
        return stats

    def stop(self) -> dict[str, Any]:
        """SIGTERM, wait, and return the final stats line the server prints on its way out."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        rest, _ = self.process.communicate(timeout=seconds(30))
        self.output.extend(rest.splitlines())
        for line in self.output:
            if line.startswith("Final stats: "):
                final: dict[str, Any] = json.loads(line.removeprefix("Final stats: "))
                return final
        raise AssertionError("no final stats line:\n" + "\n".join(self.output))


def start_server(*args: str) -> ServerProcess:
    """Start ``server.py --emulator`` on free ports and wait for its URL line."""
    command = [sys.executable, str(SERVER), "--emulator", "--port", "0", "--metrics-port", "0"]
    process = subprocess.Popen(
        [*command, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    output: list[str] = []
    url = None
    while url is None:
        line = process.stdout.readline()
        if not line:
            raise AssertionError("the server exited:\n" + "".join(output))
        output.append(line.rstrip("\n"))
        if match := _READY.search(line):
            url = match.group(1)
    metrics = process.stdout.readline().strip().removeprefix("Metrics: ")
    return ServerProcess(process, url, metrics, output)


def proc_usage(pid: int) -> tuple[float, int]:
    """CPU seconds (user + system) and resident memory in bytes of process ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return cpu, int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class BrowserClient:
    """One simulated browser on ``/ws``: records every event and when each audio chunk came."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []
        self.audio: list[tuple[float, int]] = []
        self.closed: tuple[int | None, str] | None = None
        self._changed = asyncio.Condition()
        self._reader: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, url: str, origin: str | None = None) -> BrowserClient:
        """Connect as a program does (no ``Origin``), or as a page of ``origin`` does."""
        page = None if origin is None else Origin(origin)
        client = cls(await connect(url, max_size=None, origin=page))
        client._reader = asyncio.create_task(client._read())
        return client

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                if isinstance(frame, bytes):
                    self.audio.append((time.monotonic(), len(frame)))
                else:
                    self.events.append(json.loads(frame))
                await self._notify()
        except ConnectionClosed:
            pass
        self.closed = (self.ws.close_code, self.ws.close_reason or "")
        await self._notify()

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 30) -> None:  # noqa: ASYNC109
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(predicate)

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event["type"] == kind]

    @property
    def open_calls(self) -> set[str]:
        started = {event["id"] for event in self.of_type("tool_started")}
        return started - {event["id"] for event in self.of_type("tool_settled")}

    async def stream(self, pcm: bytes) -> None:
        """Send ``pcm`` in 40 ms frames at real-time pace."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        for index, offset in enumerate(range(0, len(pcm), FRAME_BYTES)):
            await self.ws.send(pcm[offset : offset + FRAME_BYTES])
            await asyncio.sleep(max(0.0, start + (index + 1) * FRAME_SECONDS - loop.time()))

    async def speak_turn(self, timeout: float = 30) -> None:  # noqa: ASYNC109
        """Say something (1 s of tone, then silence) and wait for the model's whole answer."""
        turns = len(self.of_type("turn_complete"))
        await self.stream(tone(1.0) + tone(0.7, loud=False))
        await self.wait_for(
            lambda: len(self.of_type("turn_complete")) > turns and not self.open_calls, timeout
        )

    async def close(self) -> None:
        await self.ws.close()
        if self._reader is not None:
            await self._reader
