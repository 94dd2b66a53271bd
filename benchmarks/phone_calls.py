"""Phone calls per core: N calls through the Twilio bridge, audio both ways at real time.

The bridge process is pinned to one core; the benchmark server (``benchmarks.server``, stamped
24 kHz model audio every 40 ms and a tool call every few seconds per session) and the simulated
callers (20 ms of μ-law each way every 20 ms per call) run in processes of their own on the
other cores. Frame lag is how late the bridge has finished forwarding each model frame to its
caller (resampled, encoded, sent) relative to the frame's schedule; the criterion, as in
``bench_sessions``, is its p99 outside the worst half-second, measured once every call is up
(however long that takes on a busy machine). ``python -m benchmarks.phone_calls N SECONDS`` runs
one probe and prints one JSON line; ``--callers URL N`` is the callers' process, which hangs up
every call when its stdin closes.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

from benchmarks.bench_sessions import CALL_EVERY, Lags, lag_p99s, rss_bytes
from benchmarks.server import Server, model_name, pin_to_one_core, server_from_env, stamp_of
from livebridge import ToolRegistry
from livebridge.live.options import SessionOptions
from livebridge.live.session import LiveSession
from livebridge.phone.bridge import PhoneBridge
from livebridge.phone.caller import SimulatedCaller
from livebridge.phone.server import serve_phone
from livebridge.phone.twilio import StreamStarted
from livebridge.protocol.events import AudioOut, SessionEvent

__all__ = ["run_probe"]


class _Timed:
    """A session as the bridge sees it, noting when each model frame has been forwarded: the
    bridge asks for the next event only once it has sent the previous one's audio."""

    def __init__(self, session: LiveSession, lags: Lags) -> None:
        self._session = session
        self._lags = lags
        self.input_rate = session.input_rate
        self.input_encoding = session.input_encoding

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    async def events(self) -> AsyncIterator[SessionEvent]:
        async for event in self._session.events():
            pcm = event.data if isinstance(event, AudioOut) else b""
            yield event
            if len(pcm) >= 8 and self._lags.recording:  # the bridge is back for more
                now = time.monotonic()
                self._lags.note(now, now - stamp_of(pcm))


def _tools() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(name="work")
    async def handler(i: int) -> dict[str, int]:
        """Benchmark work."""
        return {"i": i}

    return tools


async def probe(calls: int, seconds: float) -> dict[str, float]:
    server = server_from_env()
    client = server.client()
    lags = Lags(expected=calls)
    tools = _tools()
    options = SessionOptions(transport="wire", audio_during_blocking="send")

    @asynccontextmanager
    async def open_session(start: StreamStarted) -> AsyncIterator[LiveSession]:
        model = model_name("sessions", CALL_EVERY)
        async with LiveSession.connect(
            client, model=model, tools=tools, options=options
        ) as session:
            lags.connected_one()
            yield cast(LiveSession, _Timed(session, lags))

    baseline = rss_bytes()
    bridge = PhoneBridge(open_session)
    async with serve_phone(bridge) as listening:
        port = next(iter(listening.sockets)).getsockname()[1]
        callers = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "benchmarks.phone_calls",
            "--callers",
            f"ws://127.0.0.1:{port}/twilio",
            str(calls),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
        )
        assert callers.stdin is not None
        try:
            await lags.wait_connected()
            await asyncio.sleep(1.0)  # past the first frames of the last ones up
            lags.recording = True
            wall, cpu = time.perf_counter(), time.process_time()
            await asyncio.sleep(seconds)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            lags.recording = False
            rss = rss_bytes()
        finally:
            callers.stdin.close()  # every caller hangs up
            await callers.wait()
    overall, steady = lag_p99s(lags.samples)
    return {
        "cores": cpu / wall,
        "rss_kb": (rss - baseline) / calls / 1024,
        "p99_ms": overall,
        "steady_p99_ms": steady,
        "frames": len(lags.samples),
    }


async def _callers(url: str, calls: int) -> None:
    """``calls`` simulated callers, on the line until this process's stdin closes."""
    hang_up = asyncio.ensure_future(asyncio.to_thread(sys.stdin.buffer.read))

    async def one() -> None:
        async with SimulatedCaller.dial(url):
            await asyncio.shield(hang_up)

    await asyncio.gather(*(one() for _ in range(calls)))


def run_probe(server: Server, calls: int, seconds: float) -> dict[str, float]:
    """One probe in a fresh process pinned to one core."""
    command = [sys.executable, "-m", "benchmarks.phone_calls", str(calls), str(seconds)]
    env = {**os.environ, **server.env()}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr else "failed")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


if __name__ == "__main__":
    if sys.argv[1] == "--callers":
        asyncio.run(_callers(sys.argv[2], int(sys.argv[3])))
    else:
        pin_to_one_core()
        print(json.dumps(asyncio.run(probe(int(sys.argv[1]), float(sys.argv[2])))))
