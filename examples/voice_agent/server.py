"""A voice-agent backend: browser microphone ↔ livebridge ↔ Gemini Live or OpenAI Realtime.

One process serves the web page and a WebSocket endpoint (``/ws``). Each browser client gets its
own ``LiveSession``. Binary frames carry 16-bit mono PCM (16 kHz from the browser, 24 kHz to it);
text frames carry JSON: events to the browser, a few control messages from it. The tools run
here, on the server. ``/stats`` answers JSON counters; Prometheus metrics are served beside it.

A browser sends its page's ``Origin`` with every WebSocket upgrade: only this server's own origin
(and those given with ``--allow-origin``) may open ``/ws``, so no other web site the user visits
can drive a conversation and the tools on the server's key.

    python examples/voice_agent/server.py --emulator     # fully offline, against the emulator
    GEMINI_API_KEY=... python examples/voice_agent/server.py
    python examples/voice_agent/server.py --vendor openai --emulator   # the same, OpenAI Realtime
    OPENAI_API_KEY=... python examples/voice_agent/server.py --vendor openai
    python examples/voice_agent/server.py --emulator --workers 3 --redis redis://localhost:6379

The tools, the page and the metrics are the same for both vendors; only the client, the model
and the session config differ (OpenAI audio is resampled from the page's 16 kHz to 24 kHz).
A browser that opens ``/ws?conversation=ID`` owns conversation ID: reconnecting with the same ID
(to this worker, or with ``--redis`` to any worker) continues it (``livebridge.store``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import mimetypes
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any

import anyio
from conversations import LeaseWatch, conversation_id, wait_for_lease  # the files beside this
from google import genai
from google.genai import types
from guards import TextRateLimit, same_or_allowed_origin
from prometheus_client import CollectorRegistry
from resample import upsample_16k_to_24k
from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from workers import run_workers

from livebridge import (
    AudioOut,
    Closed,
    ConversationBusyError,
    EventsDropped,
    GoAway,
    InputTranscript,
    Interrupted,
    LiveSession,
    LiveSessionError,
    OutputTranscript,
    Resumed,
    SessionClosedError,
    SessionEndedError,
    SessionEvent,
    StoreError,
    TextOut,
    ToolCallSettled,
    ToolCallStarted,
    ToolError,
    ToolRegistry,
    TurnComplete,
    client_args,
)
from livebridge.observe import PrometheusObserver
from livebridge.observe import serve as serve_metrics
from livebridge.store import RedisStore, Store

STATIC = Path(__file__).resolve().parent / "static"
PAGES = {"/": "index.html", "/index.html": "index.html", "/favicon.ico": "favicon.svg"} | {
    f"/{name}": name for name in ("app.js", "mic-worklet.js", "style.css", "favicon.svg")
}
INPUT_RATE = 16_000
OUTPUT_RATE = 24_000
DEFAULT_MODELS = {
    "gemini": "gemini-3.8-live",
    "openai": "gpt-realtime-2",
}
SYSTEM_INSTRUCTION = (
    "You are a friendly voice assistant. Answer briefly. Use get_weather and get_time for "
    "questions about a city, and find_events when the user wants something to do there."
)

# -- the agent's tools -----------------------------------------------------------------------

tools = ToolRegistry()

_SKIES = ("sunny", "cloudy", "rainy", "windy", "foggy")
_UTC_OFFSETS = {
    "paris": 1,
    "london": 0,
    "tokyo": 9,
    "new york": -5,
    "berlin": 1,
    "madrid": 1,
    "rome": 1,
    "sydney": 11,
    "cairo": 2,
    "toronto": -5,
    "lisbon": 0,
    "amsterdam": 1,
}


def _seed(city: str) -> int:
    return sum(city.lower().encode())


@tools.tool(timeout=5.0, idempotent=True)
async def get_weather(city: str) -> dict[str, Any]:
    """Current weather in a city."""
    await anyio.sleep(0.05)  # a fast backend
    seed = _seed(city)
    return {"city": city, "sky": _SKIES[seed % len(_SKIES)], "celsius": 5 + seed % 25}


@tools.tool(timeout=5.0, idempotent=True)
async def get_time(city: str) -> dict[str, Any]:
    """Local time in a city (24-hour clock)."""
    offset = _UTC_OFFSETS.get(city.strip().lower())
    if offset is None:
        raise ToolError(f"I don't know the time zone of {city}.")
    minutes = (int(time.time() // 60) + offset * 60) % (24 * 60)
    return {"city": city, "time": f"{minutes // 60:02d}:{minutes % 60:02d}", "utc_offset": offset}


@tools.tool(behavior="NON_BLOCKING", scheduling="WHEN_IDLE", timeout=10.0, idempotent=True)
async def find_events(city: str) -> dict[str, Any]:
    """Things to do in a city tonight; slow, so the conversation goes on meanwhile."""
    await anyio.sleep(1.5)  # a slow backend
    return {"city": city, "events": [f"jazz night in {city}", f"late museum opening in {city}"]}


# -- the server ------------------------------------------------------------------------------


@dataclass(slots=True)
class Stats:
    """Counters over the life of the process, served as JSON on ``/stats``."""

    sessions_active: int = 0
    sessions_total: int = 0
    sessions_refused: int = 0
    session_errors: int = 0
    calls_started: int = 0
    calls_settled: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    bad_frames: int = 0
    rate_limited_frames: int = 0
    origins_refused: int = 0
    audio_bytes_in: int = 0
    audio_bytes_out: int = 0


@dataclass(frozen=True, slots=True)
class Settings:
    model: str = DEFAULT_MODELS["gemini"]
    max_sessions: int = 100
    max_frame_bytes: int = 64 * 1024
    max_bad_frames: int = 20
    #: Origins allowed to open ``/ws`` besides the server's own (``scheme://host[:port]``).
    allowed_origins: frozenset[str] = frozenset()
    #: Text frames per connection: a burst of ``text_burst``, then ``text_rate`` per second.
    text_rate: float = 2.0
    text_burst: int = 8
    #: How long a reconnecting browser waits for its conversation's previous worker to let go.
    busy_wait: float = 20.0


def event(kind: str, **fields: Any) -> str:
    """One JSON text frame for the browser."""
    return json.dumps({"type": kind, **fields}, default=str)


class VoiceAgentServer:
    """Holds the Live client, the metrics observer and the counters shared by all clients."""

    def __init__(
        self,
        client: Any,
        settings: Settings,
        *,
        registry: CollectorRegistry | None = None,
        violations: list[Any] | None = None,
        vendor: str = "gemini",
        store: Store | None = None,
    ) -> None:
        self.client = client  # a genai.Client or an openai.AsyncOpenAI
        self.vendor = vendor
        self.store = store  # None: conversations live in this process (MemoryStore)
        self.settings = settings
        self.stats = Stats()
        self.registry = registry or CollectorRegistry()
        self.observer = PrometheusObserver(self.registry, functions=tools.names())
        self._violations = violations
        self.config: Any = types.LiveConnectConfig(
            response_modalities=[types.Modality.AUDIO],
            input_audio_transcription=types.AudioTranscriptionConfig(),
            output_audio_transcription=types.AudioTranscriptionConfig(),
            system_instruction=SYSTEM_INSTRUCTION,
        )
        if vendor == "openai":  # the same, as session.update fields
            self.config = {
                "instructions": SYSTEM_INSTRUCTION,
                "output_modalities": ["audio"],
                "audio": {
                    "input": {
                        "turn_detection": {"type": "server_vad"},
                        "transcription": {"model": "gpt-4o-mini-transcribe"},
                    }
                },
            }

    def stats_json(self) -> dict[str, Any]:
        """The counters, plus the emulator's contract violations when it runs in-process."""
        stats = self.stats
        report: dict[str, Any] = {
            "sessions_active": stats.sessions_active,
            "sessions_total": stats.sessions_total,
            "sessions_refused": stats.sessions_refused,
            "session_errors": stats.session_errors,
            "calls_started": stats.calls_started,
            "calls_settled": stats.calls_settled,
            "outcomes": dict(stats.outcomes),
            "bad_frames": stats.bad_frames,
            "rate_limited_frames": stats.rate_limited_frames,
            "origins_refused": stats.origins_refused,
            "audio_bytes_in": stats.audio_bytes_in,
            "audio_bytes_out": stats.audio_bytes_out,
        }
        if self._violations is not None:
            report["violations"] = [
                {"kind": v.kind, "message": v.message, "severity": v.severity}
                for v in list(self._violations)
            ]
        return report

    # HTTP: the page, /stats, and the upgrade to /ws ----------------------------------------

    def process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        path = request.path.partition("?")[0]
        if path == "/ws":
            return self._check_origin(request)
        if path == "/stats":
            return _response(HTTPStatus.OK, json.dumps(self.stats_json()).encode(), "json")
        name = PAGES.get(path)
        if name is None:
            return _response(HTTPStatus.NOT_FOUND, b"Not found\n", "txt")
        return _response(HTTPStatus.OK, (STATIC / name).read_bytes(), name.rpartition(".")[2])

    def _check_origin(self, request: Request) -> Response | None:
        """Refuse (403) an upgrade from another site's page; programs that send no Origin pass."""
        origin = request.headers.get("Origin")
        host = request.headers.get("Host")
        if origin is None or same_or_allowed_origin(origin, host, self.settings.allowed_origins):
            return None
        self.stats.origins_refused += 1
        body = (
            f"WebSocket connections from pages of {origin} are refused: this server accepts "
            "its own origin only. Start it with --allow-origin ORIGIN to allow another.\n"
        )
        return _response(HTTPStatus.FORBIDDEN, body.encode(), "txt")

    # one browser client --------------------------------------------------------------------

    async def converse(self, ws: ServerConnection) -> None:
        """Run one browser client's conversation until either side ends it."""
        stats = self.stats
        if stats.sessions_active >= self.settings.max_sessions:
            stats.sessions_refused += 1
            message = (
                f"The server is busy: all {self.settings.max_sessions} conversations are in "
                "use. Please try again in a minute."
            )
            await _send_quietly(ws, event("error", code="busy", message=message))
            await ws.close(1013, "server busy")
            return
        try:
            conversation = conversation_id(ws.request.path if ws.request else "")
        except ValueError as error:
            await _send_quietly(ws, event("error", code="bad_input", message=str(error)))
            await ws.close(1008, "bad conversation id")
            return
        stats.sessions_active += 1
        stats.sessions_total += 1
        leases = LeaseWatch()
        try:
            async with self._connect(conversation, leases) as session:
                await _send_quietly(
                    ws,
                    event(
                        "ready",
                        session=session.session_id,
                        input_rate=INPUT_RATE,
                        output_rate=OUTPUT_RATE,
                        conversation=conversation,
                        resumed=leases.resumed,
                        vendor=self.vendor,
                        model=self.settings.model,
                        emulator=self._violations is not None,  # offline: say so on the page
                    ),
                )
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._downstream, ws, session)
                    await self._upstream(ws, session)
                    await session.aclose()  # in-flight calls settle per the shutdown rules
        except SessionEndedError as ended:  # the service or the network ended it mid-call
            await self._closed(ws, Closed(ended.reason, ended.error))
        except LiveSessionError as error:
            stats.session_errors += 1
            message = f"The voice service could not be reached: {error}"
            await _send_quietly(ws, event("error", code="upstream", message=message))
            await ws.close(1011, "voice service unavailable")
        except StoreError as error:  # busy elsewhere, or the store is down or full
            stats.session_errors += 1
            busy = isinstance(error, ConversationBusyError)
            code = "conversation_busy" if busy else "store_unavailable"
            await _send_quietly(ws, event("error", code=code, message=f"Cannot continue: {error}"))
            await ws.close(1013, code.replace("_", " "))
        finally:
            stats.sessions_active -= 1

    def _connect(
        self, conversation: str | None, leases: LeaseWatch
    ) -> AbstractAsyncContextManager[LiveSession]:
        def connect() -> AbstractAsyncContextManager[LiveSession]:
            return LiveSession.connect(
                self.client,
                model=self.settings.model,
                tools=tools,
                config=self.config,
                observers=[self.observer, leases] if conversation else [self.observer],
                store=self.store if conversation else None,
                conversation=conversation,
            )

        return wait_for_lease(connect, self.settings.busy_wait)

    async def _upstream(self, ws: ServerConnection, session: LiveSession) -> None:
        """Browser → Live: audio frames and control messages, until the browser leaves."""
        settings = self.settings
        limit = TextRateLimit(settings.text_rate, settings.text_burst)
        rejected = 0
        try:
            async for frame in ws:
                problem: str | None
                if isinstance(frame, str) and not limit.allow():
                    self.stats.rate_limited_frames += 1
                    code = "rate_limited"
                    problem = (
                        f"Too many text messages: at most {settings.text_burst} at once, then "
                        f"{settings.text_rate:g} per second. This one was not sent."
                    )
                else:
                    problem = await self._forward(frame, session)
                    if problem is None:
                        continue
                    self.stats.bad_frames += 1
                    code = "bad_input"
                rejected += 1
                await ws.send(event("error", code=code, message=problem))
                if rejected >= settings.max_bad_frames:
                    await ws.close(1008, "too many rejected messages")
                    return
        except (ConnectionClosed, SessionClosedError, _StopRequested):
            return

    async def _forward(self, frame: str | bytes, session: LiveSession) -> str | None:
        """Pass one browser frame on; returns what was wrong with it, if anything."""
        if isinstance(frame, bytes):
            if len(frame) % 2:
                return "Audio frames must be 16-bit PCM: an even number of bytes."
            self.stats.audio_bytes_in += len(frame)
            if self.vendor == "openai":
                await session.send_audio(upsample_16k_to_24k(frame))  # 24 kHz only
            else:
                await session.send_audio(frame, rate=INPUT_RATE)
            return None
        try:
            message = json.loads(frame)
        except (ValueError, RecursionError):  # RecursionError: nested too deep, like "[[[[…"
            return 'Text frames must be JSON objects such as {"type": "text", "text": "hi"}.'
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "text" and isinstance(message.get("text"), str) and message["text"].strip():
            await session.send_text(message["text"])
            return None
        if kind == "audio_end":
            await session.send_audio_stream_end()
            return None
        if kind == "stop":
            raise _StopRequested
        return f"Unknown message {str(kind)[:40]!r}: expected 'text', 'audio_end' or 'stop'."

    async def _downstream(self, ws: ServerConnection, session: LiveSession) -> None:
        """Live → browser: the model's audio as binary frames, everything else as JSON.

        Reads every event until the session ends, even after the browser left, so that calls
        settling during shutdown are counted.
        """
        stats = self.stats
        turn = 0
        browser_gone = False
        async for item in session.events():
            frame: str | bytes | None = None
            if isinstance(item, AudioOut):
                stats.audio_bytes_out += len(item.data)
                frame = item.data
            elif isinstance(item, ToolCallStarted):
                stats.calls_started += 1
                frame = event(
                    "tool_started",
                    id=item.call_id,
                    name=item.name,
                    args=item.args,
                    behavior=item.behavior,
                    turn=turn,
                )
            elif isinstance(item, ToolCallSettled):
                stats.calls_settled += 1
                stats.outcomes[item.ending] += 1
                frame = event(
                    "tool_settled",
                    id=item.call_id,
                    name=item.name,
                    outcome=item.ending,
                    latency=round(item.latency, 4),
                    turnaround=None if item.turnaround is None else round(item.turnaround, 4),
                    error=item.error,
                )
            elif isinstance(item, Closed):
                if not browser_gone:
                    await self._closed(ws, item)
                continue
            else:
                frame = _describe(item, turn)
                if isinstance(item, TurnComplete):
                    turn += 1
            if frame is None or browser_gone:
                continue
            try:
                await ws.send(frame)
            except ConnectionClosed:
                browser_gone = True

    async def _closed(self, ws: ServerConnection, closed: Closed) -> None:
        if closed.error is None:
            await _send_quietly(ws, event("closed", reason=closed.reason))
            await ws.close(1000, "conversation ended")
            return
        self.stats.session_errors += 1
        message = f"The conversation ended unexpectedly: {closed.error}"
        await _send_quietly(ws, event("error", code="session_closed", message=message))
        await ws.close(1011, "conversation ended")


class _StopRequested(Exception):
    """The browser asked to end the conversation once its running calls have settled."""


def _describe(item: SessionEvent, turn: int) -> str | None:
    """The JSON frame for a transcript, turn or connection event."""
    if isinstance(item, InputTranscript):
        return event("input_transcript", text=item.text, turn=turn)
    if isinstance(item, OutputTranscript | TextOut):
        return event("output_transcript", text=item.text, turn=turn)
    if isinstance(item, Interrupted):
        return event("interrupted", turn=turn)
    if isinstance(item, TurnComplete):
        return event("turn_complete", turn=turn)
    if isinstance(item, GoAway | Resumed | EventsDropped):
        return event("notice", message=_notice(item))
    return None


def _notice(item: GoAway | Resumed | EventsDropped) -> str:
    if isinstance(item, GoAway):
        return f"The voice service asked to reconnect within {item.time_left:.0f} s."
    if isinstance(item, Resumed):
        return "Reconnected to the voice service; the conversation goes on."
    return f"Skipped {item.count} stale audio or transcript chunks to keep up."


async def _send_quietly(ws: ServerConnection, message: str) -> None:
    with suppress(ConnectionClosed):
        await ws.send(message)


def _response(status: HTTPStatus, body: bytes, extension: str) -> Response:
    content_type = mimetypes.types_map.get(f".{extension}", "text/plain")
    if content_type.startswith("text/") or extension in ("js", "json"):
        content_type += "; charset=utf-8"
    headers = Headers(
        {
            "Content-Type": content_type,
            "Content-Length": str(len(body)),
            "Cache-Control": "no-store",
            "Connection": "close",
        }
    )
    return Response(status.value, status.phrase, headers, body)


# -- running it ------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--emulator", action="store_true", help="run offline against the emulator")
    parser.add_argument("--host", default="127.0.0.1", help="address to serve on")
    parser.add_argument("--port", type=int, default=8765, help="page and /ws port (0: any free)")
    parser.add_argument(
        # Not 9464: that is the port the docs give `livebridge demo --metrics-port`.
        "--metrics-port",
        type=int,
        default=9465,
        help="Prometheus port (0: any free)",
    )
    parser.add_argument(
        "--vendor", choices=tuple(DEFAULT_MODELS), default="gemini", help="the Live API to use"
    )
    parser.add_argument("--model", help="model name (default: the vendor's, see DEFAULT_MODELS)")
    parser.add_argument(
        "--max-sessions", type=int, default=100, help="concurrent conversations allowed"
    )
    parser.add_argument(
        "--max-frame-bytes",
        type=int,
        default=64 * 1024,
        help="largest WebSocket message accepted from a browser",
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="also accept /ws from pages of ORIGIN, e.g. https://app.example.com (repeatable)",
    )
    parser.add_argument(
        "--text-rate",
        type=float,
        default=2.0,
        help="text messages per second per browser, after a burst of --text-burst",
    )
    parser.add_argument(
        "--text-burst", type=int, default=8, help="text messages a browser may send at once"
    )
    parser.add_argument("--redis", metavar="URL", help="share conversations through this Redis")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (needs --redis)")
    return parser


async def run(args: argparse.Namespace) -> None:
    settings = Settings(
        model=args.model or DEFAULT_MODELS[args.vendor],
        max_sessions=args.max_sessions,
        max_frame_bytes=args.max_frame_bytes,
        allowed_origins=frozenset(origin.rstrip("/") for origin in args.allow_origin),
        text_rate=args.text_rate,
        text_burst=args.text_burst,
    )
    store = RedisStore(args.redis) if args.redis else None
    async with live_client(args.emulator, args.vendor) as (client, violations):
        agent = VoiceAgentServer(
            client, settings, violations=violations, vendor=args.vendor, store=store
        )
        metrics = serve_metrics(args.metrics_port, host=args.host, registry=agent.registry)
        try:
            async with serve(
                agent.converse,
                args.host,
                args.port,
                process_request=agent.process_request,
                max_size=settings.max_frame_bytes,
            ) as server:
                port = server.sockets[0].getsockname()[1]
                print(f"Voice agent ready: open http://{args.host}:{port}/", flush=True)
                print(f"Metrics: {metrics.url}", flush=True)
                stop = asyncio.Event()
                loop = asyncio.get_running_loop()
                for signum in (signal.SIGINT, signal.SIGTERM):
                    loop.add_signal_handler(signum, stop.set)
                await stop.wait()
        finally:
            metrics.close()
            if store is not None:
                await store.aclose()
            print(f"Final stats: {json.dumps(agent.stats_json())}", flush=True)


@asynccontextmanager
async def live_client(
    offline: bool, vendor: str = "gemini"
) -> AsyncIterator[tuple[Any, list[Any] | None]]:
    """The Live client and the list of contract violations (the in-process emulator's, offline).

    Online, the client reads ``GEMINI_API_KEY`` (``OPENAI_API_KEY``) from the environment and
    there is no checker. Gemini websockets use ``client_args()``: one process, many sessions.
    """
    if vendor == "openai":
        import openai

        if not offline:
            if not os.environ.get("OPENAI_API_KEY"):
                raise SystemExit("Set OPENAI_API_KEY (or run with --emulator to stay offline).")
            yield openai.AsyncOpenAI(), None
            return
        from livebridge.emulator import Emulator

        async with Emulator(protocol="openai") as emulator:
            yield emulator.openai_client(), emulator.violations
        return
    if not offline:
        if not (os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")):
            raise SystemExit("Set GEMINI_API_KEY (or run with --emulator to stay offline).")
        yield genai.Client(http_options=types.HttpOptions(async_client_args=client_args())), None
        return
    from livebridge.emulator import Emulator

    async with Emulator() as emulator:
        yield emulator.client(async_client_args=client_args()), emulator.violations


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    if args.workers > 1:
        if not args.redis:
            raise SystemExit("--workers N needs --redis URL: the workers share conversations there")
        ports = {"port": args.port, "metrics": args.metrics_port}
        return asyncio.run(run_workers(args.workers, argv, emulator=args.emulator, **ports))
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
