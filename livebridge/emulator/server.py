"""The emulator: a TLS websocket server speaking the Gemini Live protocol (or, with
``protocol="openai"``, the OpenAI Realtime GA protocol) on 127.0.0.1. One emulator serves one
protocol; the other protocol's path gets a 404 that says which one it serves.

The server runs on its own thread with its own event loop, so starting and stopping are plain
awaits (no task group or cancel scope crosses tasks, which suits pytest fixtures) and the server's
work never competes with the client's loop. State (``transcript``, ``violations``, ``sessions``)
is appended to from that thread and may be read from any thread; ``wait_for`` wakes on changes.
``violations`` waits for connections the client has already closed to be judged, so it is final
as soon as the client's ``async with`` has exited.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Collection
from http import HTTPStatus
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, cast

from google import genai
from google.genai import types
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.protocol import State

from livebridge import profiles
from livebridge.emulator.contract import (
    HELD_ANSWERS_SECONDS,
    SERIAL_GAP_SECONDS,
    Thresholds,
    Violation,
)
from livebridge.emulator.faults import Faults
from livebridge.emulator.gemini.connection import EmulatedSession
from livebridge.emulator.gemini.handshake import (
    Route,
    open_session,
    route,
)
from livebridge.emulator.model import RuleModel
from livebridge.emulator.openai import handshake
from livebridge.emulator.openai.connection import RealtimeSession
from livebridge.emulator.scenario import Conversation, Scenario
from livebridge.emulator.shared import Retention, ServiceOptions, Shared, TranscriptEntry, trim
from livebridge.emulator.signal import wake
from livebridge.emulator.tls import Certificates, create_certificates
from livebridge.errors import UsageError

if TYPE_CHECKING:
    from livebridge.emulator.gemini.replay import ReplayScenario
    from livebridge.emulator.openai_live.replay import LiveReplay
    from livebridge.emulator.openai_live.session import LiveScenario
    from livebridge.emulator.openai_live.side import LiveSide
    from livebridge.recording.read import Recording
    from livebridge.recording.report import Pace

Protocol = Literal["gemini", "openai"]
PROTOCOLS: tuple[Protocol, ...] = ("gemini", "openai")

#: The largest frame the server reads; frames over ``MAX_FRAME_BYTES`` (1 MiB) are already
#: refused with 1007, and anything over this is cut off by the websocket layer with 1009.
READ_LIMIT = 16 << 20
#: Seconds a connection has for its TLS and WebSocket handshakes (then it is closed): a
#: half-open connection costs its buffers only that long.
OPEN_TIMEOUT = 10.0
#: How long reading ``violations`` waits for a connection the client closed to be judged.
SETTLE_SECONDS = 5.0


class Emulator:
    """A local Gemini Live (or OpenAI Realtime) server; use as ``async with Emulator(...) as emu``.

    ``scenario`` plays the model's side of every connection: a script (``async def
    scenario(conv)``) or a model such as the default ``RuleModel()``. ``faults``: frame
    delays/drops, abrupt closes, a slow reader. ``models``: the model names served (None: any);
    another name is refused during setup with the service's 1008 (OpenAI: ``model_not_found``).
    Each Gemini connection behaves as the model its setup names does, on the backend its path
    names (``livebridge.profiles``: the table livebridge itself reads; Vertex AI at
    ``/ws/google.cloud.aiplatform…``); ``model`` makes every connection behave as that model
    whatever its setup says, ``profile`` as that profile.
    ``reissue_after``, ``reissue_next_turn``, ``cancel_on_interrupt``,
    ``check_audio_during_blocking``: see ``ServiceOptions``; ``held_answers`` and
    ``serial_gap``: see ``Thresholds``.
    ``on_violation`` is called (on the server's thread) with each violation as it is found.
    ``replay`` serves a session recording's server side instead of a scenario, at ``pace``,
    waiting ``answer_timeout`` for each recorded answer, comparing all but ``ignore_fields``
    (``livebridge.emulator.gemini.replay``; a GPT-Live recording: on the GPT-Live side,
    ``livebridge.emulator.openai_live.replay``, the recording's vendor descriptor naming it);
    ``emu.replay.finish()`` reports how the client's answers diverged from the recording.
    ``protocol``: ``"gemini"`` (Gemini Live) or ``"openai"`` (OpenAI Realtime GA at
    ``/v1/realtime``; connect with ``openai_client()``); ``auto_response`` (openai): see
    ``ServiceOptions``.
    ``transcript``, ``violations``, ``connections`` and the resumption handles keep everything
    for the emulator's life (its report) unless ``retention`` bounds them (``Retention``:
    ``max_bytes`` bounds them all in bytes, ``kept_bytes`` says what they hold; the
    ``livebridge emulator`` command keeps ``STANDALONE``, 16 MiB). A finished connection lets go
    of its socket. A connection has ``OPEN_TIMEOUT`` seconds for its TLS and WebSocket
    handshakes.
    """

    def __init__(
        self,
        scenario: Scenario | LiveScenario | None = None,
        *,
        port: int = 0,
        faults: Faults | None = None,
        models: Collection[str] | None = None,
        reissue_after: float | None = None,
        reissue_next_turn: bool = False,
        cancel_on_interrupt: bool = True,
        check_audio_during_blocking: bool = True,
        held_answers: float | None = HELD_ANSWERS_SECONDS,
        serial_gap: float = SERIAL_GAP_SECONDS,
        on_violation: Callable[[Violation], None] | None = None,
        replay: Recording | str | os.PathLike[str] | None = None,
        pace: Pace = "fast",
        answer_timeout: float | None = None,
        ignore_fields: Collection[str] = (),
        protocol: Protocol = "gemini",
        auto_response: bool = False,
        model: str | None = None,
        profile: profiles.ModelProfile | None = None,
        retention: Retention | None = None,
    ) -> None:
        if protocol not in PROTOCOLS:
            raise UsageError(f"Emulator: protocol must be 'gemini' or 'openai', got {protocol!r}")
        self.replay: ReplayScenario | LiveReplay | None = None
        if replay is not None:
            if scenario is not None:
                raise UsageError("Emulator: give a scenario or a recording to replay, not both")
            replay, protocol, model = _replay_side(replay, protocol, model)
            player: ReplayScenario | LiveReplay
            if model is not None and model.startswith("gpt-live"):
                from livebridge.emulator.openai_live.replay import LiveReplay

                player = LiveReplay(
                    replay, pace=pace, answer_timeout=answer_timeout, ignore_fields=ignore_fields
                )
            else:
                from livebridge.emulator.gemini.replay import ReplayScenario

                player = ReplayScenario(
                    replay, pace=pace, answer_timeout=answer_timeout, ignore_fields=ignore_fields
                )
            self.replay = player
            scenario = player
        self.protocol: Protocol = protocol
        #: GPT-Live (``model="gpt-live-…"``): its own side serves every connection.
        self.live: LiveSide | None = None
        if model is not None and model.startswith("gpt-live"):
            from livebridge.emulator.openai_live.model import LiveRuleModel
            from livebridge.emulator.openai_live.side import LiveSide

            live_scenario = cast("LiveScenario | None", scenario) or LiveRuleModel()
            self.live = LiveSide(model, live_scenario, None)
            scenario = None
        self.scenario: Scenario = cast("Scenario | None", scenario) or RuleModel()
        if model is not None and profile is not None:
            raise UsageError("Emulator: give a model to behave as, or a profile, not both")
        self.model = model
        self.profile = profile
        self.models = None if models is None else {m.removeprefix("models/") for m in models}
        self.port = port
        self.sessions: list[EmulatedSession] = []  # Gemini connections
        self.realtime_sessions: list[RealtimeSession] = []  # OpenAI Realtime connections
        options = ServiceOptions(
            reissue_after=reissue_after,
            reissue_next_turn=reissue_next_turn,
            cancel_on_interrupt=cancel_on_interrupt,
            check_audio_during_blocking=check_audio_during_blocking,
            thresholds=Thresholds(held_answers=held_answers, serial_gap=serial_gap),
            auto_response=auto_response,
        )
        self._shared = Shared(
            faults=faults or Faults(),
            options=options,
            notify=self._notify,
            on_violation=on_violation,
            retention=retention or Retention(),
            forget=self._forget,
        )
        if self.live is not None:
            self.live.shared = self._shared
        #: Connections accepted so far (``connections`` may keep only the newest).
        self.connections_served = 0
        self._judged = threading.Condition()
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self._waiters_lock = threading.Lock()
        self._counter = itertools.count(1)
        self._directory: Path | None = None
        self._certificates: Certificates | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._done: concurrent.futures.Future[None] = concurrent.futures.Future()

    # public state ------------------------------------------------------------------------------

    @property
    def transcript_dropped(self) -> int:
        """Transcript entries dropped under ``retention`` (the oldest first)."""
        return self._shared.dropped

    @property
    def kept_bytes(self) -> int | None:
        """The bytes the report holds now, as ``Retention.max_bytes`` counts them (None when
        no byte budget is set)."""
        return self._shared.kept_bytes

    @property
    def violation_counts(self) -> dict[tuple[str, str], int]:
        """Every violation so far by (severity, kind), including any ``retention`` dropped."""
        return dict(self._shared.tally)

    @property
    def base_url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> str:
        if self._certificates is None:
            raise RuntimeError("the emulator is not running")
        return str(self._certificates.ca_file)

    @property
    def connections(self) -> list[EmulatedSession | RealtimeSession]:
        """Every connection so far, whatever its protocol (``sessions`` holds the Gemini ones,
        ``realtime_sessions`` the OpenAI ones)."""
        return [*self.sessions, *self.realtime_sessions]

    @property
    def transcript(self) -> list[TranscriptEntry]:
        return self._shared.transcript

    @property
    def violations(self) -> list[Violation]:
        """Every violation so far (under ``retention``, the newest; ``violation_counts``
        counts them all); connections the client has closed are judged first."""
        if threading.current_thread() is not self._thread:
            with self._judged:
                self._judged.wait_for(self._closed_ones_judged, SETTLE_SECONDS)
        return self._shared.violations

    def _closed_ones_judged(self) -> bool:
        return all(s.finished or s.ws.state is State.OPEN for s in self.connections)

    async def settled(self, timeout: float = 10) -> None:  # noqa: ASYNC109 (a bound is the point)
        """Wait until every connection so far has ended and been judged."""
        await self.wait_for(lambda: all(s.finished for s in self.connections), timeout)

    def expire_handles(self) -> None:
        """Forget every resumption handle issued so far, as the service does after hours."""
        self._shared.handles.clear()

    def client(self, *, vertexai: bool = False, **http_kwargs: Any) -> genai.Client:
        """A ``genai.Client`` (api_key "test") pointed at this emulator and trusting its CA;
        ``vertexai``: on the Vertex AI path, as in express mode (an API key, no project)."""
        if self._certificates is None:
            raise RuntimeError("the emulator is not running")
        if self.live is not None:  # an openai.AsyncOpenAI whose live.connect() trusts us
            return self.live.client(self.base_url, self._certificates.client_context())  # type: ignore[no-any-return]
        if self.protocol != "gemini":
            raise UsageError("this emulator speaks OpenAI Realtime: use emu.openai_client()")
        client_args = dict(http_kwargs.pop("async_client_args", None) or {})
        client_args.setdefault("ssl", self._certificates.client_context())
        http_kwargs.setdefault("base_url", self.base_url)
        options = types.HttpOptions(async_client_args=client_args, **http_kwargs)
        return genai.Client(api_key="test", vertexai=vertexai, http_options=options)

    def profile_of(self, model: str, backend: profiles.Backend) -> profiles.ModelProfile:
        """The profile a connection naming ``model`` on ``backend`` behaves as."""
        if self.profile is not None:
            return self.profile
        return profiles.profile_for(self.model or model, backend)

    def openai_client(self, **kwargs: Any) -> Any:
        """An ``openai.AsyncOpenAI`` (api_key "test", base URL ``…/v1``) whose realtime
        connections trust this emulator's CA; ``kwargs`` go to ``openai.AsyncOpenAI``."""
        if self._certificates is None:
            raise RuntimeError("the emulator is not running")
        if self.protocol != "openai":
            raise UsageError("this emulator speaks Gemini Live: use emu.client()")
        try:  # the openai SDK is optional: only this client needs it
            from livebridge.emulator.openai.client import openai_client
        except ImportError as missing:
            raise UsageError(
                f"Emulator.openai_client needs the openai package ({missing}): pip install openai"
            ) from None
        return openai_client(self.base_url, self._certificates.client_context(), **kwargs)

    def env(self, *, vertexai: bool = False) -> dict[str, str]:
        """Environment that points any google-genai (or, for ``protocol="openai"``, any
        ``openai``) program at this emulator; ``vertexai``: google-genai's Vertex AI mode with
        an API key (express mode), on the Vertex path. (google-genai 3.6 reads
        ``GOOGLE_VERTEX_BASE_URL`` for ``Client(vertexai=True)`` but ``GOOGLE_GEMINI_BASE_URL``
        when Vertex mode comes from ``GOOGLE_GENAI_USE_VERTEXAI``: both are set.)"""
        if vertexai:
            return {
                "GOOGLE_GENAI_USE_VERTEXAI": "true",
                "GOOGLE_VERTEX_BASE_URL": self.base_url,
                "GOOGLE_GEMINI_BASE_URL": self.base_url,
                "SSL_CERT_FILE": self.ca_file,
                "GOOGLE_API_KEY": "test",
            }
        if self.protocol == "openai" or self.live is not None:
            return {
                "OPENAI_BASE_URL": f"{self.base_url}/v1",
                "OPENAI_API_KEY": "test",
                "SSL_CERT_FILE": self.ca_file,
            }
        return {
            "GOOGLE_GEMINI_BASE_URL": self.base_url,
            "SSL_CERT_FILE": self.ca_file,
            "GEMINI_API_KEY": "test",
        }

    async def wait_for(
        self,
        predicate: Callable[[], bool],
        timeout: float = 10,  # noqa: ASYNC109 (a test helper: a bound is the point)
    ) -> None:
        """Wait until ``predicate()`` is true, re-checking whenever the emulator's state changes."""
        event = asyncio.Event()
        waiter = (asyncio.get_running_loop(), event)
        with self._waiters_lock:
            self._waiters.add(waiter)
        try:
            async with asyncio.timeout(timeout):
                while not predicate():
                    await event.wait()
                    event.clear()
        finally:
            with self._waiters_lock:
                self._waiters.discard(waiter)

    def _notify(self) -> None:
        with self._judged:
            self._judged.notify_all()
        with self._waiters_lock:
            waiters = list(self._waiters)
        for loop, event in waiters:
            wake(loop, event)

    # lifecycle ---------------------------------------------------------------------------------

    async def __aenter__(self) -> Emulator:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Create the CA and start serving on the server thread.

        Raises ``OSError`` when the port cannot be bound (nothing is left behind).
        """
        self._directory = Path(tempfile.mkdtemp(prefix="livebridge-emulator-"))
        self._certificates = create_certificates(self._directory)
        self._thread = threading.Thread(target=self._run, name="livebridge-emulator", daemon=True)
        self._thread.start()
        try:
            self.port = await asyncio.wrap_future(self._ready)
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Close every connection (1001, the server's close), wait for the server thread,
        remove the CA files."""
        serving = self._ready.done() and self._ready.exception() is None
        if serving and self._loop is not None and self._stop is not None and not self._done.done():
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as error:
            if not self._ready.done():
                self._ready.set_exception(error)
            self._done.set_exception(error)
        else:
            self._done.set_result(None)

    async def _serve(self) -> None:
        assert self._certificates is not None
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server: Server = await serve(
            self._handle,
            "127.0.0.1",
            self.port,
            ssl=self._certificates.server_context,
            process_request=self._process_request,
            max_size=READ_LIMIT,
            ping_interval=None,
            open_timeout=OPEN_TIMEOUT,
            ssl_handshake_timeout=OPEN_TIMEOUT,
        )
        port = int(server.sockets[0].getsockname()[1])
        self._ready.set_result(port)
        await self._stop.wait()
        self._shared.stopping = True
        server.close()
        await server.wait_closed()

    # one connection ----------------------------------------------------------------------------

    async def _handle(self, ws: ServerConnection) -> None:
        assert ws.request is not None
        if self.live is not None:
            await self.live.handle(ws)
            return
        if self.protocol == "openai":
            await self._handle_realtime(ws)
            return
        request_route = route(ws.request.path, ws.request.headers)
        assert isinstance(request_route, Route)
        session = EmulatedSession(
            self._shared,
            ws,
            f"s{next(self._counter)}",
            path=ws.request.path,
            api_version=request_route.api_version,
            auth=request_route.auth,
            backend=request_route.backend,
        )
        self._keep(self.sessions, session)
        try:
            opened = await open_session(
                session,
                models=self.models,
                profile_of=self.profile_of,
                handles=self._shared.handles,
            )
            if opened:
                await session.converse(lambda: self._play(session))
        finally:
            if not session.finished:  # the setup failed: no call was ever issued
                session.finish("server_close")

    async def _handle_realtime(self, ws: ServerConnection) -> None:
        assert ws.request is not None
        accepted = handshake.route(ws.request.path, ws.request.headers)
        assert isinstance(accepted, handshake.RealtimeRoute)
        session_id = f"s{next(self._counter)}"
        session = RealtimeSession(
            self._shared, ws, session_id, path=ws.request.path, model=accepted.model
        )
        self._keep(self.realtime_sessions, session)
        try:
            if accepted.beta:
                await session.refuse(handshake.beta_refusal())
            elif self.models is not None and accepted.model not in self.models:
                await session.refuse(handshake.model_not_found(accepted.model))
            else:
                await session.start()
                await session.converse(lambda: self._play(session))
        except ConnectionClosed:
            pass
        finally:
            if not session.finished:
                session.finish("server_close")

    def _keep(self, sessions: list[Any], session: EmulatedSession | RealtimeSession) -> None:
        self.connections_served += 1
        sessions.append(session)
        trim(sessions, self._shared.retention.connections)

    def _forget(self, ids: set[int]) -> None:
        """Let go of the finished connections ``Retention.max_bytes`` dropped."""
        if any(id(session) in ids for session in self.sessions):
            self.sessions[:] = [s for s in self.sessions if id(s) not in ids]
        if any(id(session) in ids for session in self.realtime_sessions):
            self.realtime_sessions[:] = [s for s in self.realtime_sessions if id(s) not in ids]

    async def _play(self, session: EmulatedSession | RealtimeSession) -> None:
        await self.scenario(Conversation(session))

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        """Refuse at the HTTP level what the service refuses there, with a one-line reason."""
        if self.live is not None:
            return self.live.process_request(connection, request)
        if self.protocol == "openai":
            result = handshake.route(request.path, request.headers)
            if isinstance(result, handshake.RealtimeRoute):
                return None
            if isinstance(route(request.path, request.headers), Route):
                result = (
                    HTTPStatus.NOT_FOUND,
                    (
                        "this emulator speaks OpenAI Realtime at /v1/realtime; "
                        "start one with protocol 'gemini' for the Gemini Live API"
                    ),
                )
        else:
            gemini = route(request.path, request.headers)
            if isinstance(gemini, Route):
                return None
            result = gemini
            if request.path.partition("?")[0].rstrip("/") == handshake.PATH:
                result = (
                    HTTPStatus.NOT_FOUND,
                    (
                        "this emulator speaks Gemini Live; start one with protocol 'openai' "
                        "(livebridge emulator --protocol openai) for /v1/realtime"
                    ),
                )
        status, text = result
        return connection.respond(status, text + "\n")


def _replay_side(
    replay: Recording | str | os.PathLike[str], protocol: Protocol, model: str | None
) -> tuple[Recording, Protocol, str | None]:
    """The recording read, and the side that serves its wire: the emulator options its
    vendor's descriptor names (``Vendor.emulator``); a ``model`` given stays."""
    from livebridge.recording.read import Recording, read_recording
    from livebridge.vendors import DESCRIPTORS

    recording = replay if isinstance(replay, Recording) else read_recording(replay)
    vendor = next(v for v in DESCRIPTORS if v.name == recording.vendor)
    if vendor.replay_model is None:
        raise UsageError(f"Emulator: recordings of {vendor.title} are not replayed")
    side = vendor.emulator
    wanted = side.get("protocol", "gemini")
    if protocol != wanted and protocol != "gemini":  # "gemini" is the default: not a choice
        raise UsageError(
            f"Emulator: {recording.path} is a recording of a {vendor.title} session, "
            f"not served on protocol {protocol!r}"
        )
    return recording, cast("Protocol", wanted), model or side.get("model")
