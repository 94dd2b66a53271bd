"""Soak: N livebridge sessions for M minutes of audio both ways and tool turns; does anything grow?

The emulator runs in a process of its own (``benchmarks.server``, the ``sessions`` scenario:
24 kHz model audio at real time and one tool call every ``--call-every`` seconds per session).
Each session sends 40 ms of 16 kHz microphone audio every 40 ms and answers its calls; the
client process samples its RSS, open file descriptors and asyncio tasks every ``--every``
seconds and prints one row per sample, then the growth between the first and last sample.
A steady state shows flat RSS, fds and tasks while the calls answered keep climbing.

Run with ``python -m benchmarks.bench_soak`` (``--quick`` for a smoke run of a few seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from google import genai
from google.genai import types

from benchmarks.server import FRAME_SECONDS, Server, model_name, serve
from livebridge import ToolRegistry, client_args
from livebridge.live.session import LiveSession
from livebridge.protocol.events import ToolCallSettled, ToolCallStarted

MIC_FRAME = bytes(int(16_000 * FRAME_SECONDS) * 2)
HEADER = "| elapsed s | sessions | calls answered | RSS MB | open fds | asyncio tasks |"


@dataclass(frozen=True, slots=True)
class Settings:
    sessions: int
    seconds: float
    every: float
    call_every: float


@dataclass(frozen=True, slots=True)
class Sample:
    elapsed: float
    sessions: int
    answered: int
    rss_mb: float
    fds: int
    tasks: int

    def row(self) -> str:
        return (
            f"| {self.elapsed:.0f} | {self.sessions} | {self.answered} | {self.rss_mb:.1f}"
            f" | {self.fds} | {self.tasks} |"
        )


def rss_mb() -> float:
    """Resident memory of this process (Linux ``/proc``; 0 elsewhere)."""
    status = Path("/proc/self/status")
    if not status.exists():
        return 0.0
    for line in status.read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def open_fds() -> int:
    fd_dir = Path("/proc/self/fd")
    return len(os.listdir(fd_dir)) if fd_dir.exists() else 0


class Soak:
    """The client side: ``sessions`` LiveSessions, counted as they run."""

    def __init__(self, server: Server, settings: Settings, *, progress: bool) -> None:
        self.server = server
        self.settings = settings
        self.progress = progress
        self.answered = 0
        self.started = 0  # calls admitted (ToolCallStarted)
        self.runs = 0  # handler executions: more than ``started`` is a call run twice
        self.open = 0
        self.double_executions = 0
        # A client of its own: the benchmarks' shared one belongs to an event loop already closed.
        options = types.HttpOptions(
            base_url=server.base_url, async_client_args=client_args(ssl=server.ssl_context())
        )
        self.client = genai.Client(api_key="test", http_options=options)
        self.tools = ToolRegistry()

        @self.tools.tool(name="work")
        async def work(i: int) -> dict[str, int]:
            """Benchmark work."""
            self.runs += 1
            await asyncio.sleep(0.01)
            return {"i": i}

    async def session(self, stop: asyncio.Event) -> None:
        model = model_name("sessions", self.settings.call_every)
        async with LiveSession.connect(self.client, model=model, tools=self.tools) as session:
            self.open += 1
            try:

                async def speak() -> None:
                    start = time.monotonic()
                    frame = 0
                    while not stop.is_set():
                        await session.send_audio(MIC_FRAME, rate=16_000)
                        frame += 1
                        due = start + frame * FRAME_SECONDS
                        await asyncio.sleep(max(0.0, due - time.monotonic()))

                async def listen() -> None:
                    async for event in session.events():
                        if isinstance(event, ToolCallSettled) and event.outcome == "ok":
                            self.answered += 1
                        elif isinstance(event, ToolCallStarted):
                            self.started += 1

                speaker = asyncio.ensure_future(speak())
                listener = asyncio.ensure_future(listen())
                await stop.wait()
                speaker.cancel()
                listener.cancel()
                await asyncio.gather(speaker, listener, return_exceptions=True)
            finally:
                self.open -= 1

    def sample(self, started: float) -> Sample:
        return Sample(
            time.monotonic() - started,
            self.open,
            self.answered,
            rss_mb(),
            open_fds(),
            len(asyncio.all_tasks()),
        )

    async def run(self) -> list[Sample]:
        settings = self.settings
        stop = asyncio.Event()
        sessions = [asyncio.ensure_future(self.session(stop)) for _ in range(settings.sessions)]
        started = time.monotonic()
        samples: list[Sample] = []
        try:
            while True:
                await asyncio.sleep(settings.every)
                samples.append(self.sample(started))
                if self.progress:
                    print(samples[-1].row(), flush=True)
                failed = [s for s in sessions if s.done() and s.exception() is not None]
                if failed:
                    raise RuntimeError(f"a session failed: {failed[0].exception()!r}")
                if time.monotonic() - started >= settings.seconds:
                    break
        finally:
            stop.set()
            await asyncio.gather(*sessions, return_exceptions=True)
        self.double_executions = max(0, self.runs - self.started)
        return samples


def summary(samples: Sequence[Sample]) -> str:
    """The growth from the first sample (after warm-up) to the last."""
    if len(samples) < 2:
        return "(too short to compare samples)"
    first, last = samples[0], samples[-1]
    return (
        f"from {first.elapsed:.0f} s to {last.elapsed:.0f} s: RSS {last.rss_mb - first.rss_mb:+.1f}"
        f" MB, fds {last.fds - first.fds:+d}, tasks {last.tasks - first.tasks:+d},"
        f" calls answered {last.answered - first.answered:+d}"
    )


QUICK = Settings(sessions=4, seconds=6.0, every=2.0, call_every=0.5)
#: What ``python -m benchmarks`` runs: a short soak next to the other tables.
SHORT = Settings(sessions=20, seconds=60.0, every=15.0, call_every=2.0)


def run(server: Server, settings: Settings, *, progress: bool = False) -> list[str]:
    """The table of samples and the summary line; ``progress`` prints each row as it comes."""
    title = f"soak: {settings.sessions} sessions x {settings.seconds:.0f} s, audio both ways"
    rule = "|---:|---:|---:|---:|---:|---:|"
    if progress:
        print(f"{title}\n\n{HEADER}\n{rule}", flush=True)
    soak = Soak(server, settings, progress=progress)
    samples = asyncio.run(soak.run())
    line = (
        f"{summary(samples)}; {soak.started} calls admitted, {soak.runs} handler runs,"
        f" {soak.double_executions} run twice"
    )
    if progress:
        print(f"\n{line}")
    return [title, "", HEADER, rule, *(s.row() for s in samples), "", line]


def settings_from(argv: Sequence[str] | None) -> Settings:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="4 sessions for 6 s")
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--every", type=float, default=30.0, help="seconds between samples")
    parser.add_argument("--call-every", type=float, default=2.0, help="seconds between calls")
    options = parser.parse_args(argv)
    if options.quick:
        return QUICK
    if options.sessions < 1 or options.minutes <= 0 or options.every <= 0:
        parser.error("--sessions, --minutes and --every must be positive")
    return Settings(options.sessions, options.minutes * 60, options.every, options.call_every)


def main(argv: Sequence[str] | None = None) -> int:
    settings = settings_from(argv)
    with tempfile.TemporaryDirectory() as directory, serve(Path(directory)) as server:
        run(server, settings, progress=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
