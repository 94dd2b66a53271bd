"""Many sessions per core: audio both ways at real time, a tool call every few seconds each.

Every probe runs in a fresh client process pinned to one core, against the server process on the
other cores. Each session sends 40 ms of 16 kHz microphone audio every 40 ms and receives 40 ms
of 24 kHz model audio every 40 ms; frame lag is how late a frame is sent, or received, relative to
its schedule (the server stamps each frame with its schedule). Variants: ``livebridge``
(``LiveSession`` with a tool registry), ``sdk`` (a plain google-genai loop) and ``raw`` (websockets
+ msgspec, the same protocol without any model layer: the floor). Every websocket is opened with
``livebridge.client_args()`` (no permessage-deflate) and an 8 KiB TLS read buffer, unless a row
says otherwise. Reported: client cores used, RSS per session, p99 lag; the largest N that keeps
p99 lag under 20 ms (``Search``: up to three trials per N, the median decides; doubling, then
bisecting; the worst half-second of a trial is left out, so that one stall of a shared machine
does not end the search; every trial is printed); one 8 x 50 ms tool turn after another while
100 other sessions stream; memory per idle session.

Run with ``python -m benchmarks.bench_sessions`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import asyncio
import asyncio.sslproto
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.genai import types

from benchmarks.clients import CLIENTS, answer, raw_connect, raw_setup, sdk_config
from benchmarks.server import (
    FRAME_SECONDS,
    Server,
    model_name,
    pin_to_one_core,
    serve,
    server_from_env,
    stamp_of,
)
from livebridge import ToolRegistry
from livebridge.live.options import SessionOptions
from livebridge.live.session import LiveSession
from livebridge.protocol.encoding import b64decode
from livebridge.protocol.events import AudioOut
from livebridge.protocol.transport import Audio
from livebridge.vendors.gemini import wire
from livebridge.vendors.gemini.client_frames import encode_client

VARIANTS = ("livebridge", "sdk", "raw")
#: The turn client measured next to each variant's streaming sessions.
TURN_CLIENTS = {"livebridge": "livebridge", "sdk": "sdk-gather", "raw": "raw"}
LAG_LIMIT_MS = 20.0
#: Lags are grouped in windows this long (seconds); the worst one is left out of the criterion.
LAG_WINDOW = 0.5
CALL_EVERY = 3.0
MIC_FRAME = bytes(int(16_000 * FRAME_SECONDS) * 2)
SMALL_TLS_BUFFER = 8 * 1024
TURN_CALLS = 8
TURN_SECONDS = 0.05


@dataclass(slots=True)
class Lags:
    """Frame lags (seconds), each with when it was measured, once every session is up; and how
    many of the ``expected`` sessions are up (connected, about to stream)."""

    expected: int = 0
    recording: bool = False
    samples: list[tuple[float, float]] = field(default_factory=list)
    connected: int = 0
    all_connected: asyncio.Event = field(default_factory=asyncio.Event)

    def note(self, now: float, lag: float) -> None:
        if self.recording:
            self.samples.append((now, lag))

    def connected_one(self) -> None:
        self.connected += 1
        if self.connected >= self.expected:
            self.all_connected.set()

    async def wait_connected(self, timeout: float = 120.0) -> None:  # noqa: ASYNC109
        """Until every expected session is up: on a busy machine that takes longer than any
        fixed pause, and a probe that measured before would measure nothing."""
        try:
            await asyncio.wait_for(self.all_connected.wait(), timeout)
        except TimeoutError:
            raise RuntimeError(
                f"{self.connected} of {self.expected} sessions connected in {timeout:g} s"
            ) from None


def p99(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[int(0.99 * (len(ordered) - 1))] if ordered else float("nan")


def lag_p99s(samples: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """p99 lag (ms) of every frame, and of the frames outside the worst ``LAG_WINDOW``.

    The second is the search's criterion: one stall of the shared machine (a GC pause, a
    neighbour's burst) delays every session's frames at once and would, alone, decide a trial.
    """
    if not samples:
        return float("nan"), float("nan")
    start = min(when for when, _ in samples)
    windows: dict[int, list[float]] = {}
    for when, lag in samples:
        windows.setdefault(int((when - start) / LAG_WINDOW), []).append(lag)
    overall = p99([lag for _, lag in samples]) * 1000
    if len(windows) < 2:
        return overall, overall
    worst = max(windows, key=lambda w: p99(windows[w]))
    rest = [lag for w, lags in windows.items() if w != worst for lag in lags]
    return overall, p99(rest) * 1000


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


async def mic(send: Callable[[bytes], Awaitable[None]], lags: Lags, stop: asyncio.Event) -> None:
    """Send a silent 40 ms frame every 40 ms, noting how late each one goes out."""
    lags.connected_one()
    start = time.monotonic()
    frame = 0
    while not stop.is_set():
        due = start + frame * FRAME_SECONDS
        now = time.monotonic()
        lags.note(now, now - due)
        await send(MIC_FRAME)
        frame += 1
        await asyncio.sleep(max(0.0, start + frame * FRAME_SECONDS - time.monotonic()))


def heard(pcm: bytes, lags: Lags) -> None:
    if lags.recording and len(pcm) >= 8:
        now = time.monotonic()
        lags.note(now, now - stamp_of(pcm))


async def livebridge_session(server: Server, lags: Lags, stop: asyncio.Event) -> None:
    tools = ToolRegistry()

    @tools.tool(name="work")
    async def handler(i: int) -> dict[str, int]:
        """Benchmark work."""
        return {"i": i}

    model = model_name("sessions", CALL_EVERY)
    options = SessionOptions(transport="wire", audio_during_blocking="send")
    async with LiveSession.connect(
        server.client(), model=model, tools=tools, options=options
    ) as session:

        async def send(pcm: bytes) -> None:
            await session.send_audio(pcm, rate=16_000)

        sender = asyncio.ensure_future(mic(send, lags, stop))
        try:
            async for event in session.events():
                if isinstance(event, AudioOut):
                    heard(event.data, lags)
                if stop.is_set():
                    break
        finally:
            sender.cancel()


async def sdk_session(server: Server, lags: Lags, stop: asyncio.Event) -> None:
    client = server.client()
    model = model_name("sessions", CALL_EVERY)
    async with client.aio.live.connect(model=model, config=sdk_config()) as session:

        async def send(pcm: bytes) -> None:
            blob = types.Blob(data=pcm, mime_type="audio/pcm;rate=16000")
            await session.send_realtime_input(audio=blob)

        sender = asyncio.ensure_future(mic(send, lags, stop))
        try:
            while not stop.is_set():
                async for message in session.receive():
                    content = message.server_content
                    if content is not None and content.model_turn is not None:
                        for part in content.model_turn.parts or []:
                            if part.inline_data is not None and part.inline_data.data:
                                heard(part.inline_data.data, lags)
                    if message.tool_call is not None:
                        calls = message.tool_call.function_calls or []
                        responses = [answer(c, {"i": int((c.args or {})["i"])}) for c in calls]
                        await session.send_tool_response(function_responses=responses)
                    if stop.is_set():
                        break
        finally:
            sender.cancel()


async def raw_session(server: Server, lags: Lags, stop: asyncio.Event) -> None:
    """The same work on a bare websocket with the msgspec codec: the floor."""
    model = model_name("sessions", CALL_EVERY)
    async with raw_connect(server, model) as ws:
        await ws.send(raw_setup(model), text=True)
        await ws.recv(decode=False)

        async def send(pcm: bytes) -> None:
            await ws.send(encode_client(Audio(pcm, 16_000)), text=True)

        sender = asyncio.ensure_future(mic(send, lags, stop))
        try:
            while not stop.is_set():
                message = wire.decode_server(await ws.recv(decode=False))
                content = message.server_content
                if content is not None and content.model_turn is not None:
                    for part in content.model_turn.parts:
                        if part.inline_data is not None and part.inline_data.data:
                            heard(b64decode(part.inline_data.data), lags)
                if message.tool_call is not None:
                    calls = message.tool_call.function_calls
                    responses = [
                        {
                            "id": c.id,
                            "name": c.name,
                            "response": {"output": {"i": (c.args or {})["i"]}},
                        }
                        for c in calls
                    ]
                    frame = wire.encode({"toolResponse": {"functionResponses": responses}})
                    await ws.send(frame, text=True)
        finally:
            sender.cancel()


STREAMERS = {"livebridge": livebridge_session, "sdk": sdk_session, "raw": raw_session}


async def idle_session(
    server: Server, variant: str, tuned: bool, lags: Lags, stop: asyncio.Event
) -> None:
    model = model_name("idle")
    if variant == "livebridge":
        client = server.client(tuned=tuned)
        async with LiveSession.connect(client, model=model, tools=ToolRegistry()):
            lags.connected_one()
            await stop.wait()
    elif variant == "sdk":
        client = server.client(tuned=tuned)
        async with client.aio.live.connect(model=model, config=sdk_config()):
            lags.connected_one()
            await stop.wait()
    else:
        async with raw_connect(server, model) as ws:
            await ws.send(raw_setup(model), text=True)
            await ws.recv(decode=False)
            lags.connected_one()
            await stop.wait()


async def probe(
    variant: str, sessions: int, seconds: float, idle: bool, tuned: bool, turns: int
) -> dict[str, float]:
    """Run ``sessions`` sessions for ``seconds`` in this process; returns the measurements.

    With ``turns``, one more session runs that many 8 x 50 ms tool turns once every session is
    up (the server records their turnaround), and the measurement lasts until they are done.
    """
    server = server_from_env()
    server.client(tuned=tuned)
    lags = Lags(expected=sessions)
    stop = asyncio.Event()
    baseline = rss_bytes()

    def one() -> Awaitable[None]:
        if idle:
            return idle_session(server, variant, tuned, lags, stop)
        return STREAMERS[variant](server, lags, stop)

    tasks = []
    for _ in range(sessions):
        tasks.append(asyncio.ensure_future(one()))
        await asyncio.sleep(0.005)
    await lags.wait_connected()
    await asyncio.sleep(1.0)  # past the first frames of the last ones up
    lags.recording = True
    wall, cpu = time.perf_counter(), time.process_time()
    if turns:
        model = model_name("turnaround", TURN_CALLS, turns, f"{variant}_loaded")
        await CLIENTS[TURN_CLIENTS[variant]](server, model, turns, TURN_SECONDS)
    else:
        await asyncio.sleep(seconds)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    lags.recording = False
    rss = rss_bytes()
    stop.set()
    await asyncio.wait(tasks, timeout=10)
    for task in tasks:
        task.cancel()
    overall, steady = lag_p99s(lags.samples)
    rss_kb = (rss - baseline) / sessions / 1024
    return {"cores": cpu / wall, "rss_kb": rss_kb, "p99_ms": overall, "steady_p99_ms": steady}


def run_probe(
    server: Server,
    variant: str,
    sessions: int,
    seconds: float,
    *,
    idle: bool = False,
    tuned: bool = True,
    turns: int = 0,
) -> dict[str, float]:
    """Run ``probe`` in a fresh client process pinned to one core.

    ``tuned``: ``client_args()`` and an 8 KiB TLS read buffer for every connection; else the
    SDK's defaults (livebridge still shrinks its own TLS buffers).
    """
    command = [sys.executable, "-m", "benchmarks.bench_sessions", "--probe", variant]
    command += ["--sessions", str(sessions), "--seconds", str(seconds), "--turns", str(turns)]
    if idle:
        command.append("--idle")
    if not tuned:
        command.append("--defaults")
    env = {**os.environ, **server.env()}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr else "failed")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def progress(line: str) -> None:
    """Trials are printed as they finish: a long search shows how it got its answer."""
    print(line, flush=True)


@dataclass(frozen=True, slots=True)
class Search:
    """How the largest N is searched: ``trials`` probes per N (the median decides; two that
    agree decide alone), ``seconds`` each, doubling from ``start`` until an N fails, then
    bisecting until the bracket is within an eighth; no new N after ``budget`` seconds."""

    start: int
    seconds: float
    trials: int
    budget: float
    cap: int = 1600


QUICK_SEARCH = Search(start=8, seconds=1.0, trials=1, budget=3.0)
FULL_SEARCH = Search(start=100, seconds=6.0, trials=3, budget=300.0)


def trial_n(
    server: Server, variant: str, n: int, search: Search, say: Callable[[str], None]
) -> tuple[bool, dict[str, float]]:
    """Probe ``n`` sessions up to ``search.trials`` times; passed if the median trial did."""
    results: list[dict[str, float]] = []
    for trial in range(1, search.trials + 1):
        result = run_probe(server, variant, n, search.seconds)
        results.append(result)
        passed = result["steady_p99_ms"] <= LAG_LIMIT_MS
        say(
            f"  {variant} N={n} trial {trial}: p99 lag {result['p99_ms']:.1f} ms, without the"
            f" worst {LAG_WINDOW:g} s {result['steady_p99_ms']:.1f} ms,"
            f" {result['cores']:.2f} cores: {'pass' if passed else 'fail'}"
        )
        verdicts = [r["steady_p99_ms"] <= LAG_LIMIT_MS for r in results]
        if verdicts.count(True) * 2 > search.trials or verdicts.count(False) * 2 > search.trials:
            break  # the median is decided
    results.sort(key=lambda r: r["steady_p99_ms"])
    median = results[len(results) // 2]  # of two that agree, the worse
    return median["steady_p99_ms"] <= LAG_LIMIT_MS, median


def largest_n(
    server: Server, variant: str, search: Search, say: Callable[[str], None] = progress
) -> tuple[int, int | None, dict[str, float]]:
    """The largest N that passes, the smallest that failed (None: none did), the median trial
    of the largest N: double from ``search.start`` until one fails, then bisect."""
    deadline = time.monotonic() + search.budget
    good, good_result, bad = 0, {}, None
    n = search.start
    while n <= search.cap:
        passed, result = trial_n(server, variant, n, search, say)
        if not passed:
            bad = n
            break
        good, good_result = n, result
        if time.monotonic() >= deadline:
            say(f"  {variant}: time budget spent at N={n}, no failing N found")
            break
        n *= 2
    while bad is not None and bad - good > max(2, good // 8) and time.monotonic() < deadline:
        n = (good + bad) // 2
        passed, result = trial_n(server, variant, n, search, say)
        if passed:
            good, good_result = n, result
        else:
            bad = n
    return good, bad, good_result


IDLE_SETTINGS = (
    ("sdk", False, "SDK defaults: deflate, 256 KiB TLS buffer"),
    ("sdk", True, "client_args(), 8 KiB TLS buffer"),
    ("livebridge", False, "SDK defaults: deflate; 8 KiB TLS buffer"),
    ("livebridge", True, "client_args(), 8 KiB TLS buffer"),
    ("raw", True, "no deflate, 8 KiB TLS buffer"),
)


def loaded_turns(server: Server, variant: str, others: int, turns: int) -> dict[str, float]:
    """8 x 50 ms turns while ``others`` sessions stream; turnaround above the handler, in ms."""
    server.take_results()
    result = run_probe(server, variant, others, 0.0, turns=turns)
    above = sorted((row["seconds"] - TURN_SECONDS) * 1000 for row in server.take_results())
    if not above:
        raise RuntimeError("no turn was recorded")
    result["turn_p50_ms"] = above[len(above) // 2]
    result["turn_p99_ms"] = above[round(0.99 * (len(above) - 1))]
    return result


def run(server: Server, quick: bool) -> list[str]:
    seconds = 1.0 if quick else 8.0
    fixed = 10 if quick else 100
    lines = [
        f"| sessions ({fixed} at once, audio both ways) | client cores | RSS/session KB "
        "| p99 frame lag ms |",
        "|---|---:|---:|---:|",
    ]
    for variant in VARIANTS:
        try:
            r = run_probe(server, variant, fixed, seconds)
            lines.append(
                f"| {variant} | {r['cores']:.2f} | {r['rss_kb']:.0f} | {r['p99_ms']:.1f} |"
            )
        except Exception as exc:
            lines.append(f"| {variant} | failed: {str(exc)[:80]} | | |")
    lines += [
        "",
        f"| {TURN_CALLS} x 50 ms tool turn while {fixed} sessions stream | turn client "
        "| p50 ms above handler | p99 ms above handler | p99 frame lag ms |",
        "|---|---|---:|---:|---:|",
    ]
    for variant in VARIANTS:
        try:
            r = loaded_turns(server, variant, fixed, 5 if quick else 75)
            lines.append(
                f"| {variant} | {TURN_CLIENTS[variant]} | {r['turn_p50_ms']:.2f} "
                f"| {r['turn_p99_ms']:.2f} | {r['p99_ms']:.1f} |"
            )
        except Exception as exc:
            lines.append(f"| {variant} | failed: {str(exc)[:80]} | | | |")
    lines += [
        "",
        f"| largest N per core with p99 lag ≤ {LAG_LIMIT_MS:g} ms | N | first N over "
        f"| client cores | p99 lag ms, worst {LAG_WINDOW:g} s left out |",
        "|---|---:|---:|---:|---:|",
    ]
    search = QUICK_SEARCH if quick else FULL_SEARCH
    for variant in VARIANTS:
        try:
            n, over, r = largest_n(server, variant, search)
            cores, lag = r.get("cores", float("nan")), r.get("steady_p99_ms", float("nan"))
            above = "—" if over is None else str(over)
            lines.append(f"| {variant} | {n} | {above} | {cores:.2f} | {lag:.1f} |")
        except Exception as exc:
            lines.append(f"| {variant} | failed: {str(exc)[:80]} | | | |")
    idle = 10 if quick else 200
    lines += [
        "",
        f"| idle sessions ({idle}) | connection settings | RSS/session KB |",
        "|---|---|---:|",
    ]
    for variant, tuned, label in IDLE_SETTINGS:
        try:
            r = run_probe(server, variant, idle, 0.3 if quick else 1.0, idle=True, tuned=tuned)
            lines.append(f"| {variant} | {label} | {r['rss_kb']:.0f} |")
        except Exception as exc:
            lines.append(f"| {variant} | {label} | failed: {str(exc)[:80]} |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--probe", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--sessions", type=int, default=10, help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=2.0, help=argparse.SUPPRESS)
    parser.add_argument("--idle", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--defaults", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--turns", type=int, default=0, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.probe:
        pin_to_one_core()
        tuned = not options.defaults
        if tuned:
            asyncio.sslproto.SSLProtocol.max_size = SMALL_TLS_BUFFER
        result: Any = asyncio.run(
            probe(
                options.probe, options.sessions, options.seconds, options.idle, tuned, options.turns
            )
        )
        print(json.dumps(result))
        return 0
    with tempfile.TemporaryDirectory() as directory, serve(Path(directory)) as server:
        print("\n".join(run(server, options.quick)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
