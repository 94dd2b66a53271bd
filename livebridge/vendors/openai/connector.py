"""OpenAI Realtime connections through the official ``openai`` SDK.

The SDK opens the connection (``client.realtime.connect(model=...)``: base URL, authentication,
headers); then livebridge configures the session (``session.update``, waiting for
``session.updated`` so a refused config fails the connect with the service's words) and one of
two transports carries the events:

- ``WireTransport`` (the default): msgspec (``livebridge.vendors.openai.wire``) directly on the
  SDK's websocket: each frame decoded into one small struct, audio encoded without a JSON round
  trip.
- ``SdkTransport``: the SDK's ``recv()`` (pydantic models) and ``send()``. Slower; it relies on
  nothing but the SDK's public API.

The SDK's own reconnection is left off: livebridge decides what a drop means (``protocol.openai``).
Every way a connection fails or ends is raised as ``TransportClosed``; the API key is kept out of
log lines (``connectors.secrets``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
from openai import AsyncOpenAI, OpenAIError
from openai.resources.realtime.realtime import AsyncRealtimeConnection
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from livebridge import profiles
from livebridge.calls.tools import ToolRegistry
from livebridge.errors import (
    LiveSessionError,
    MalformedMessageError,
    ModelNotFoundError,
    PolicyViolationError,
    TransportClosed,
    UsageError,
)
from livebridge.protocol import resume, secrets
from livebridge.protocol.actions import ProtocolOptions
from livebridge.protocol.transport import (
    CONNECT_SECONDS,
    MAX_MESSAGE_BYTES,
    ClientItem,
    TransportKind,
)
from livebridge.protocol.websocket import (
    FrameTransport,
    close,
    closed,
    host_of,
    opening_timed_out,
    ping_behind,
    shrink_tls_read_buffer,
)
from livebridge.vendors.openai import wire as openai_wire
from livebridge.vendors.openai.declarations import declarations
from livebridge.vendors.openai.errors import service_error
from livebridge.vendors.openai.protocol import OpenAIRealtimeProtocol
from livebridge.vendors.openai.wire import ServerEvent

#: Events that may arrive before ``session.updated`` and are handed to the protocol after it.
_EARLY_LIMIT = 64


class OpenAIConnector:
    """Opens OpenAI Realtime connections for one session with an ``openai.AsyncOpenAI``.

    ``config`` is a dict of ``session.update`` session fields (GA shape), merged over
    livebridge's defaults (``session_config``); the registry's functions are added to its tools.
    ``profile``: what the model does with tool calls (default: ``profiles.profile_for`` the
    model). ``websocket_options`` go to ``websockets`` (``ssl``, ``max_size``, ...).
    ``connect_timeout`` bounds each opening: the websocket handshake and ``session.updated``.
    """

    def __init__(
        self,
        client: AsyncOpenAI,
        *,
        model: str,
        tools: ToolRegistry,
        config: Mapping[str, Any] | None = None,
        transport: TransportKind = "wire",
        keepalive: Mapping[str, float] | None = None,
        tls_read_buffer: int = 8 * 1024,
        websocket_options: Mapping[str, Any] | None = None,
        connect_timeout: float = CONNECT_SECONDS,
        profile: profiles.ModelProfile | None = None,
    ) -> None:
        if config is not None and not isinstance(config, Mapping):
            raise UsageError(
                f"OpenAI Realtime takes config as a dict of session fields (session.update), "
                f"not {type(config).__name__}"
            )
        if profile is not None and profile.vendor != "openai":
            raise UsageError(f"an AsyncOpenAI needs an OpenAI model profile, not {profile.family}")
        self._client = client
        self._model = model
        self._unknown = profile is None  # a name the table lacks: a warning once it connects
        self.profile = profile or profiles.profile_for(model, "openai")
        self._given = tools
        self._tools = self.profile.adapt(tools)
        parallel = self.profile.parallel_tool_calls
        self._session = session_config(config, self._tools, parallel_tool_calls=parallel)
        self._transport: TransportKind = transport
        self._options: dict[str, Any] = {
            "compression": None,  # base64 audio barely compresses; deflate costs memory and CPU
            "max_size": MAX_MESSAGE_BYTES,
            **(resume.keepalive_settings() if keepalive is None else keepalive),
            **(websocket_options or {}),
        }
        self._tls_read_buffer = tls_read_buffer
        self._connect_timeout = connect_timeout
        secrets.protect(getattr(client, "api_key", None))

    def protocol(
        self, tools: ToolRegistry, options: ProtocolOptions, *, observed: bool
    ) -> OpenAIRealtimeProtocol:
        adapted = self._tools if tools is self._given else self.profile.adapt(tools)
        audio = self._session["audio"]
        g711 = (
            audio["input"]["format"].get("type") == "audio/pcmu",
            audio["output"]["format"].get("type") == "audio/pcmu",
        )
        return OpenAIRealtimeProtocol(adapted, options, observed=observed, g711=g711)

    @asynccontextmanager
    async def open(self, handle: str | None) -> AsyncIterator[WireTransport | SdkTransport]:
        if handle is not None:
            raise UsageError("OpenAI Realtime has no resumption handles")
        timeout = self._connect_timeout
        deadline = anyio.current_time() + timeout
        options = {**self._options, "open_timeout": timeout}  # the handshake's share
        manager = self._client.realtime.connect(
            model=self._model,
            websocket_connection_options=options,  # type: ignore[arg-type]
        )
        try:
            async with manager as connection:
                ws = connection._connection
                if self._tls_read_buffer:
                    shrink_tls_read_buffer(ws.transport, self._tls_read_buffer)
                session_id, early = await self._set_up(connection, deadline)
                if self._unknown:  # the service serves the name: say the table lacks it
                    self._unknown = False
                    profiles.warn_unknown(self.profile)
                if self._transport == "wire":
                    yield WireTransport(connection, session_id, early)
                else:
                    yield SdkTransport(connection, session_id, early)
        except ConnectionClosed as exc:
            raise closed(exc) from None
        except InvalidStatus as exc:
            raise _refused(exc.response.status_code, _body(exc)) from None
        except InvalidHandshake as exc:
            error = LiveSessionError(f"OpenAI Realtime handshake failed: {exc}")
            raise TransportClosed(None, str(exc), error=error) from None
        except TimeoutError:  # the handshake (before OSError, which it is)
            raise opening_timed_out(self._host(), timeout, "the websocket handshake") from None
        except OSError as exc:
            raise TransportClosed(None, f"network error: {exc}") from None
        except OpenAIError as exc:
            error = LiveSessionError(f"The openai SDK could not connect: {exc}")
            raise TransportClosed(None, str(exc), error=error) from None

    def _host(self) -> str:
        """The host the client connects to, for messages."""
        client = self._client
        return host_of(getattr(client, "websocket_base_url", None) or client.base_url)

    async def _set_up(
        self, connection: AsyncRealtimeConnection, deadline: float
    ) -> tuple[str | None, list[ServerEvent]]:
        """Send ``session.update``; wait for ``session.updated``. Returns the session id and
        the events that came meanwhile. An ``error`` first (a refused model or config) ends the
        connection with 1008 and that error; no answer by ``deadline`` (the opening's, from
        ``connect_timeout``) is a ``ConnectTimeoutError``, retried like a drop."""
        ws = connection._connection
        update = {"type": "session.update", "session": self._session}
        with contextlib.suppress(ConnectionClosed):  # refused at once: the error that says
            await ws.send(openai_wire.encode(update), text=True)  # why is still to be read
        session_id: str | None = None
        early: list[ServerEvent] = []
        with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
            while True:
                try:
                    event = openai_wire.decode_server(await ws.recv(decode=False))
                except MalformedMessageError:
                    continue
                if event.type == "session.created" and event.session is not None:
                    session_id = event.session.id
                elif event.type == "session.updated":
                    if event.session is not None and event.session.id:
                        session_id = session_id or event.session.id
                    return session_id, early
                elif event.type == "error":
                    error = setup_error(event.error or openai_wire.ErrorDetail())
                    raise TransportClosed(1008, "session refused", error=error)
                elif len(early) < _EARLY_LIMIT:
                    early.append(event)
        raise opening_timed_out(self._host(), self._connect_timeout, "session.update")


def session_config(
    config: Mapping[str, Any] | None,
    tools: ToolRegistry,
    *,
    parallel_tool_calls: bool = False,
) -> dict[str, Any]:
    """The ``session.update`` session: livebridge's defaults, the app's ``config`` over them
    (nested dicts merged), the registry's functions added to ``tools``.

    Defaults: ``type: "realtime"``, ``audio/pcm`` at 24 kHz in and out (``audio/pcmu`` may
    replace either: G.711 μ-law, as phone lines carry it), and, with
    ``parallel_tool_calls`` (a model that takes the field: ``ModelProfile.parallel_tool_calls``),
    ``parallel_tool_calls: true``: livebridge runs the calls of one response concurrently as one
    batch, so it says on the wire that the model may issue them together rather than rely on a
    default the API does not document.
    """
    pcm = {"type": "audio/pcm", "rate": openai_wire.INPUT_RATE}
    session: dict[str, Any] = {
        "type": "realtime",
        "audio": {"input": {"format": dict(pcm)}, "output": {"format": dict(pcm)}},
    }
    if parallel_tool_calls:
        session["parallel_tool_calls"] = True
    given = dict(config or {})
    for direction in ("input", "output"):  # another format replaces PCM's, rate and all
        fmt = ((given.get("audio") or {}).get(direction) or {}).get("format")
        if isinstance(fmt, Mapping) and fmt.get("type", "audio/pcm") != "audio/pcm":
            session["audio"][direction]["format"] = {}
    _merge(session, given)
    if session.get("type") != "realtime":
        raise UsageError(
            f"session type {session.get('type')!r} is not supported: LiveSession speaks "
            "realtime (conversation) sessions, type 'realtime'"
        )
    for direction in ("input", "output"):
        fmt = session.get("audio", {}).get(direction, {}).get("format", {})
        if fmt.get("type") == "audio/pcmu":  # G.711 μ-law, 8 kHz: phone audio as is
            continue
        if fmt.get("type") != "audio/pcm" or fmt.get("rate", openai_wire.INPUT_RATE) != 24_000:
            raise UsageError(
                f"audio.{direction}.format must be audio/pcm at 24000 Hz or audio/pcmu "
                f"(got {fmt!r}): livebridge sends and delivers 16-bit PCM at 24 kHz, or μ-law"
            )
    functions = declarations(tools)
    if functions:
        session["tools"] = [*(session.get("tools") or []), *functions]
    return session


def setup_error(detail: openai_wire.ErrorDetail) -> LiveSessionError:
    """An ``error`` before ``session.updated``: the connection or the config was refused."""
    if detail.code == "model_not_found":
        said = service_error(detail, "Check the model name (e.g. gpt-realtime).")
        return ModelNotFoundError(str(said))
    if detail.code in ("invalid_api_key", "insufficient_quota"):
        return PolicyViolationError(str(service_error(detail, "Check the API key.")))
    hint = "The session was not configured: fix the config given to LiveSession.connect."
    return LiveSessionError(str(service_error(detail, hint)))


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def _body(exc: InvalidStatus) -> str:
    body = exc.response.body or b""
    try:
        message = json.loads(body)["error"]["message"]
        return str(message)
    except (ValueError, KeyError, TypeError):
        return body[:200].decode("utf-8", "replace")


def _refused(status: int, said: str) -> TransportClosed:
    """The upgrade was refused with an HTTP status: a clear error for the app."""
    error: LiveSessionError
    if status in (401, 403):
        error = PolicyViolationError(
            f"OpenAI refused the connection (HTTP {status}: {said}). Check the API key "
            "(OPENAI_API_KEY) and that it may use the Realtime API."
        )
    elif status in (400, 404) and "model" in said.lower():
        error = ModelNotFoundError(
            f"OpenAI Realtime does not know the model (HTTP {status}: {said}). Check the model "
            "name (e.g. gpt-realtime)."
        )
    else:
        error = LiveSessionError(f"OpenAI Realtime refused the connection (HTTP {status}: {said}).")
    return TransportClosed(status, said, error=error)


class WireTransport(FrameTransport[ServerEvent]):
    """msgspec (``livebridge.vendors.openai.wire``) on the SDK's websocket: the hot path."""

    def __init__(
        self, connection: AsyncRealtimeConnection, session_id: str | None, early: list[ServerEvent]
    ) -> None:
        super().__init__(
            connection._connection,
            session_id,
            early,
            openai_wire.decode_server,
            openai_wire.client_frames,
        )


class SdkTransport:
    """Every event through the SDK's public ``recv()`` / ``send()`` and its pydantic models."""

    def __init__(
        self, connection: AsyncRealtimeConnection, session_id: str | None, early: list[ServerEvent]
    ) -> None:
        self.session_id = session_id
        self._connection = connection
        self._early = early

    async def recv(self) -> ServerEvent:
        if self._early:
            return self._early.pop(0)
        try:
            event = await self._connection.recv()
        except ConnectionClosed as exc:
            raise closed(exc) from None
        except ValueError as exc:
            raise MalformedMessageError(f"not an OpenAI Realtime event ({exc})") from None
        raw = event.model_dump(mode="json") if hasattr(event, "model_dump") else event
        return openai_wire.from_builtins(raw, strict=False)

    async def send(self, item: ClientItem) -> None:
        try:
            for frame in openai_wire.client_frames(item):
                await self._connection.send(json.loads(frame))
        except ConnectionClosed as exc:
            raise closed(exc) from None

    async def close(self) -> None:
        await close(self._connection._connection)

    async def ping_behind(self) -> asyncio.Future[Any]:
        return await ping_behind(self._connection._connection)
