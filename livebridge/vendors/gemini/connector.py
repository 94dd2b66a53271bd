"""Gemini Live connections through the google-genai SDK.

The SDK opens the connection (endpoint, authentication, setup); then one of two transports carries
the messages:

- ``WireTransport`` (the default): the msgspec codec of ``livebridge.vendors.gemini.wire``
  directly on the SDK's websocket: no per-message model validation.
- ``SdkTransport``: the SDK's own ``receive()`` and ``send_*`` methods. Slower, but it relies on
  nothing but the SDK's public API.

Everything that touches the SDK or its websocket lives here: choosing the model profile
(``livebridge.profiles``: from the model name, and Vertex AI or the Developer API from the client),
building the ``LiveConnectConfig`` (tools declared as the profile adapts them, resumption on),
keepalive and TLS buffer tuning, mapping SDK and socket errors to ``TransportClosed``, and keeping
the API key out of the websocket library's log lines.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from types import MappingProxyType, TracebackType
from typing import Any

import anyio
import msgspec
from google import genai
from google.genai import errors as genai_errors
from google.genai import live as genai_live
from google.genai import types
from websockets.exceptions import ConnectionClosed

from livebridge import profiles
from livebridge.calls.tools import ToolRegistry
from livebridge.errors import MalformedMessageError, TransportClosed, UsageError
from livebridge.protocol import resume, secrets
from livebridge.protocol.actions import ProtocolOptions
from livebridge.protocol.transport import (
    CONNECT_SECONDS,
    Audio,
    ClientItem,
    Frames,
    Text,
    ToolAnswers,
    Transport,
    TransportKind,
)
from livebridge.protocol.websocket import CLOSE_SECONDS as CLOSE_SECONDS
from livebridge.protocol.websocket import close as _close
from livebridge.protocol.websocket import closed as _closed
from livebridge.protocol.websocket import (
    host_of,
    opening_timed_out,
    send_and_ping,
    shrink_tls_read_buffer,
)
from livebridge.protocol.websocket import ping_behind as _ping_behind
from livebridge.vendors.gemini import wire
from livebridge.vendors.gemini.answers import to_sdk
from livebridge.vendors.gemini.client_frames import encode_client
from livebridge.vendors.gemini.declarations import declarations as gemini_declarations
from livebridge.vendors.gemini.protocol import GeminiLiveProtocol

#: Resumption asked for, no handle yet: the same for every session's first connection.
_FRESH_SESSION = types.SessionResumptionConfig()
#: The default keepalive, shared by every connector that uses it.
_KEEPALIVE: Mapping[str, float] = MappingProxyType(resume.keepalive_settings())


def _keepalive(keepalive: Mapping[str, float] | None) -> Mapping[str, float]:
    """The connector's own keepalive settings: a copy, or the shared default when equal."""
    if keepalive is None or keepalive == _KEEPALIVE:
        return _KEEPALIVE
    return dict(keepalive)


class GeminiConnector:
    """Opens Gemini Live connections for one session with a ``genai.Client``.

    ``config`` is the app's ``LiveConnectConfig`` (or dict); the registry's functions, adapted to
    the model's profile (``profile``, else ``profiles.profile_for`` the model on the client's
    backend), are added to its tools and each connection asks for resumption with the handle it
    is given. Raises ``ModelCapabilityError`` for a tool the model cannot run as declared.
    ``connect_timeout`` bounds each opening, handshake and ``setup`` together: the SDK itself
    waits for ``setupComplete`` without a bound.
    """

    __slots__ = (
        "_client",
        "_config",
        "_connect_timeout",
        "_given",
        "_keepalive",
        "_model",
        "_tls_read_buffer",
        "_tools",
        "_transport",
        "_unknown",
        "profile",
    )

    def __init__(
        self,
        client: genai.Client,
        *,
        model: str,
        tools: ToolRegistry,
        config: types.LiveConnectConfigOrDict | None = None,
        transport: TransportKind = "wire",
        keepalive: Mapping[str, float] | None = None,
        tls_read_buffer: int = 8 * 1024,
        connect_timeout: float = CONNECT_SECONDS,
        profile: profiles.ModelProfile | None = None,
    ) -> None:
        backend: profiles.Backend = "vertex" if client.vertexai else "developer"
        self._unknown = profile is None  # a name the table lacks: a warning once it connects
        if profile is None:
            profile = profiles.profile_for(model, backend)
        elif profile.vendor != "gemini":
            raise UsageError(f"a genai.Client needs a Gemini model profile, not {profile.family}")
        self.profile = profile
        self._client = client
        self._model = model
        self._given = tools
        self._tools = profile.adapt(tools)
        self._config = live_config(config, self._tools, profile)
        self._transport: TransportKind = transport
        self._keepalive = _keepalive(keepalive)
        self._tls_read_buffer = tls_read_buffer
        self._connect_timeout = connect_timeout
        secrets.protect(getattr(getattr(client, "_api_client", None), "api_key", None))

    def protocol(
        self, tools: ToolRegistry, options: ProtocolOptions, *, observed: bool
    ) -> GeminiLiveProtocol:
        adapted = self._tools if tools is self._given else self.profile.adapt(tools)
        return GeminiLiveProtocol(adapted, options, observed=observed, profile=self.profile)

    def open(self, handle: str | None) -> _Connection:
        return _Connection(self, handle)

    def _host(self) -> str:
        """The host the client connects to, for messages."""
        api = getattr(self._client, "_api_client", None)
        options = getattr(api, "_http_options", None)
        return host_of(getattr(options, "base_url", None))

    def _tune(self, sdk_session: genai_live.AsyncSession) -> None:
        """Keepalive and buffer sizes for the SDK's websocket (which livebridge does not create).

        websockets reads ``ping_interval``/``ping_timeout`` on every ping, so setting them after
        connecting takes effect. asyncio gives every TLS connection a 256 KiB read buffer; Live
        frames are small, so a smaller one saves most of a session's memory at no CPU cost. The
        opening handshake's request (its headers, the API key among them: about 2.5 KB of RSS a
        session) is not read again once the connection is open; its response stays, as websockets
        tells by it that the handshake is done.
        """
        ws = getattr(sdk_session, "_ws", None)
        if ws is None:
            return
        for name, value in self._keepalive.items():
            if hasattr(ws, name):
                setattr(ws, name, value)
        if self._tls_read_buffer:
            shrink_tls_read_buffer(ws.transport, self._tls_read_buffer)
        ws.request = None


class _Connection:
    """One connection of a ``GeminiConnector``: ``async with`` it for the transport.

    A class rather than an ``asynccontextmanager``: it outlives nothing but its three slots,
    where a generator keeps its frame, a wrapper and the loop's weak reference for as long as
    the connection lasts (~0.5 KB per session). Whatever the SDK or the socket raise, while
    connecting, inside the block or while closing, leaves as ``TransportClosed``.
    """

    __slots__ = ("_connector", "_handle", "_sdk")

    def __init__(self, connector: GeminiConnector, handle: str | None) -> None:
        self._connector = connector
        self._handle = handle
        self._sdk: AbstractAsyncContextManager[genai_live.AsyncSession] | None = None

    async def __aenter__(self) -> Transport:
        connector, handle = self._connector, self._handle
        # The connector's own config, not a copy: the SDK keeps the config it is given for as
        # long as the connection lasts, and only the handle changes between connections (one
        # connection at a time).
        config = connector._config
        config.session_resumption = (
            _FRESH_SESSION if handle is None else types.SessionResumptionConfig(handle=handle)
        )
        sdk = connector._client.aio.live.connect(model=connector._model, config=config)
        try:
            with anyio.fail_after(connector._connect_timeout):
                session = await sdk.__aenter__()
        except TimeoutError:  # before OSError, which it is
            raise opening_timed_out(
                connector._host(), connector._connect_timeout, "the handshake or setup"
            ) from None
        except _SDK_ERRORS as exc:
            raise _transport_closed(exc) from None
        self._sdk = sdk
        if connector._unknown:  # the service serves the name: say the table does not know it
            connector._unknown = False
            profiles.warn_unknown(connector.profile)
        try:
            connector._tune(session)
            if connector._transport == "wire":
                return WireTransport(session)
            return SdkTransport(session)
        except BaseException as exc:
            await self.__aexit__(type(exc), exc, exc.__traceback__)
            raise

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        sdk, self._sdk = self._sdk, None
        if sdk is None:
            return False
        try:
            if await sdk.__aexit__(kind, exc, traceback):
                return True
        except _SDK_ERRORS as error:
            raise _transport_closed(error) from None
        if isinstance(exc, _SDK_ERRORS):
            raise _transport_closed(exc) from None
        return False


_SDK_ERRORS = (genai_errors.APIError, ConnectionClosed, OSError)


def _transport_closed(exc: BaseException) -> TransportClosed:
    """How an SDK or socket error ends a connection."""
    if isinstance(exc, genai_errors.APIError):
        return TransportClosed(exc.code, str(exc.details or exc.message or ""))
    if isinstance(exc, ConnectionClosed):
        return _closed(exc)
    return TransportClosed(None, f"network error: {exc}")


#: The thinking level stated for a model that requires one when the app's config gives none.
DEFAULT_THINKING_LEVEL = types.ThinkingLevel.LOW


def live_config(
    config: types.LiveConnectConfigOrDict | None,
    tools: ToolRegistry,
    profile: profiles.ModelProfile | None = None,
) -> types.LiveConnectConfig:
    """The app's config with the registry's functions declared, and a thinking level where the
    model requires one and the app gave none (``thinking_level_required``)."""
    if config is None:
        base = types.LiveConnectConfig()
    elif isinstance(config, types.LiveConnectConfig):
        base = config.model_copy(deep=True)
    else:
        base = types.LiveConnectConfig.model_validate(config)
    declarations = gemini_declarations(tools)
    if declarations:
        base.tools = [*(base.tools or []), types.Tool(function_declarations=declarations)]
    if profile is not None and profile.thinking_level_required:
        thinking = base.thinking_config or types.ThinkingConfig()
        if thinking.thinking_level is None:
            base.thinking_config = thinking.model_copy(
                update={"thinking_level": DEFAULT_THINKING_LEVEL}
            )
    return base


class WireTransport:
    """msgspec on the SDK's websocket: the hot path."""

    __slots__ = ("_ws", "session_id")

    def __init__(self, session: genai_live.AsyncSession) -> None:
        self.session_id = session.session_id
        self._ws = session._ws

    async def recv(self) -> wire.ServerMessage:
        try:
            frame = await self._ws.recv(decode=False)
        except ConnectionClosed as exc:
            raise _closed(exc) from None
        try:
            return wire.decode_server(frame)
        except ValueError as exc:
            raise MalformedMessageError(f"{exc}: {bytes(frame[:200])!r}") from None

    async def send(self, item: ClientItem) -> None:
        try:
            await self._ws.send(encode_client(item), text=True)
        except ConnectionClosed as exc:
            raise _closed(exc) from None

    async def ping_behind(self) -> asyncio.Future[Any]:
        return await _ping_behind(self._ws)

    async def send_proven(self, item: ClientItem) -> asyncio.Future[Any]:
        return await send_and_ping(self._ws, (encode_client(item),))

    async def close(self) -> None:
        await _close(self._ws)


class SdkTransport:
    """Every message through the SDK's public methods and pydantic models."""

    __slots__ = ("_session", "_turns", "session_id")

    def __init__(self, session: genai_live.AsyncSession) -> None:
        self.session_id = session.session_id
        self._session = session
        self._turns: AsyncIterator[types.LiveServerMessage] | None = None

    async def recv(self) -> wire.ServerMessage:
        try:
            while True:
                if self._turns is None:
                    self._turns = self._session.receive()  # ends after each turnComplete
                try:
                    message = await anext(self._turns)
                    break
                except StopAsyncIteration:
                    self._turns = None
        except ValueError as exc:  # the SDK could not parse the frame; its iterator is spent
            self._turns = None
            raise MalformedMessageError(str(exc)) from None
        except genai_errors.APIError as exc:
            raise TransportClosed(exc.code, exc.details or exc.message or "") from None
        except ConnectionClosed as exc:
            raise _closed(exc) from None
        raw = message.model_dump(mode="json", by_alias=True, exclude_none=True)
        try:
            return msgspec.convert(raw, wire.ServerMessage, strict=False)
        except ValueError as exc:
            raise MalformedMessageError(str(exc)) from None

    async def send(self, item: ClientItem) -> None:
        session = self._session
        try:
            if isinstance(item, Frames):
                raise TypeError("Gemini Live sends no vendor frames")
            if isinstance(item, ToolAnswers):
                if any("id" not in response for response in item.responses):
                    # Answers by name: the SDK refuses them on the Developer API (Vertex takes
                    # them), yet a call without an id must still be answered.
                    await session._ws.send(encode_client(item), text=True)
                else:
                    await session.send_tool_response(function_responses=to_sdk(item.responses))
            elif isinstance(item, Audio):
                blob = types.Blob(data=item.pcm, mime_type=f"audio/pcm;rate={item.rate}")
                await session.send_realtime_input(audio=blob)
            elif isinstance(item, Text):
                await session.send_realtime_input(text=item.text)
            elif item.kind == "activity_start":
                await session.send_realtime_input(activity_start=types.ActivityStart())
            elif item.kind == "activity_end":
                await session.send_realtime_input(activity_end=types.ActivityEnd())
            else:
                await session.send_realtime_input(audio_stream_end=True)
        except ConnectionClosed as exc:
            raise _closed(exc) from None

    async def ping_behind(self) -> asyncio.Future[Any]:
        return await _ping_behind(self._session._ws)

    async def close(self) -> None:
        await _close(self._session._ws)
