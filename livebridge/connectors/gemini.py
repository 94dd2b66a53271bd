"""Gemini Live connections through the google-genai SDK.

The SDK opens the connection (endpoint, authentication, setup); then one of two transports carries
the messages:

- ``WireTransport`` (the default): the msgspec codec of ``livebridge.wire`` directly on the SDK's
  websocket: no per-message model validation.
- ``SdkTransport``: the SDK's own ``receive()`` and ``send_*`` methods. Slower, but it relies on
  nothing but the SDK's public API.

Everything that touches the SDK or its websocket lives here: building the ``LiveConnectConfig``
(tools declared, resumption on), keepalive and TLS buffer tuning, mapping SDK and socket errors to
``TransportClosed``, and keeping the API key out of the websocket library's log lines.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import msgspec
from google import genai
from google.genai import errors as genai_errors
from google.genai import live as genai_live
from google.genai import types
from websockets.exceptions import ConnectionClosed

from livebridge import resume, wire
from livebridge.adapters.gemini_live import to_sdk
from livebridge.connectors import secrets
from livebridge.connectors.websocket import CLOSE_SECONDS as CLOSE_SECONDS
from livebridge.connectors.websocket import close as _close
from livebridge.connectors.websocket import closed as _closed
from livebridge.connectors.websocket import shrink_tls_read_buffer
from livebridge.errors import MalformedMessageError, TransportClosed
from livebridge.protocol import GeminiLiveProtocol, ProtocolOptions
from livebridge.tools import ToolRegistry
from livebridge.transport import (
    Audio,
    ClientItem,
    Frames,
    Text,
    ToolAnswers,
    Transport,
    TransportKind,
    encode_client,
)

__all__ = [
    "GeminiConnector",
    "SdkTransport",
    "WireTransport",
    "live_config",
    "shrink_tls_read_buffer",
]


#: Resumption asked for, no handle yet: the same for every session's first connection.
_FRESH_SESSION = types.SessionResumptionConfig()


class GeminiConnector:
    """Opens Gemini Live connections for one session with a ``genai.Client``.

    ``config`` is the app's ``LiveConnectConfig`` (or dict); the registry's functions are added
    to its tools and each connection asks for resumption with the handle it is given.
    """

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
    ) -> None:
        self._client = client
        self._model = model
        self._config = live_config(config, tools)
        self._transport: TransportKind = transport
        self._keepalive = dict(resume.keepalive_settings() if keepalive is None else keepalive)
        self._tls_read_buffer = tls_read_buffer
        secrets.protect(getattr(getattr(client, "_api_client", None), "api_key", None))

    def protocol(
        self, tools: ToolRegistry, options: ProtocolOptions, *, observed: bool
    ) -> GeminiLiveProtocol:
        return GeminiLiveProtocol(tools, options, observed=observed)

    @asynccontextmanager
    async def open(self, handle: str | None) -> AsyncIterator[Transport]:
        # The connector's own config, not a copy: the SDK keeps the config it is given for as
        # long as the connection lasts, and only the handle changes between connections (one
        # connection at a time).
        config = self._config
        config.session_resumption = (
            _FRESH_SESSION if handle is None else types.SessionResumptionConfig(handle=handle)
        )
        try:
            async with self._client.aio.live.connect(model=self._model, config=config) as sdk:
                self._tune(sdk)
                yield WireTransport(sdk) if self._transport == "wire" else SdkTransport(sdk)
        except genai_errors.APIError as exc:
            raise TransportClosed(exc.code, str(exc.details or exc.message or "")) from None
        except ConnectionClosed as exc:
            raise _closed(exc) from None
        except OSError as exc:
            raise TransportClosed(None, f"network error: {exc}") from None

    def _tune(self, sdk_session: genai_live.AsyncSession) -> None:
        """Keepalive and buffer sizes for the SDK's websocket (which livebridge does not create).

        websockets reads ``ping_interval``/``ping_timeout`` on every ping, so setting them after
        connecting takes effect. asyncio gives every TLS connection a 256 KiB read buffer; Live
        frames are small, so a smaller one saves most of a session's memory at no CPU cost.
        """
        ws = getattr(sdk_session, "_ws", None)
        if ws is None:
            return
        for name, value in self._keepalive.items():
            if hasattr(ws, name):
                setattr(ws, name, value)
        if self._tls_read_buffer:
            shrink_tls_read_buffer(ws.transport, self._tls_read_buffer)


def live_config(
    config: types.LiveConnectConfigOrDict | None, tools: ToolRegistry
) -> types.LiveConnectConfig:
    """The app's config with the registry's functions declared."""
    if config is None:
        base = types.LiveConnectConfig()
    elif isinstance(config, types.LiveConnectConfig):
        base = config.model_copy(deep=True)
    else:
        base = types.LiveConnectConfig.model_validate(config)
    declarations = tools.declarations()
    if declarations:
        base.tools = [*(base.tools or []), types.Tool(function_declarations=declarations)]
    return base


class WireTransport:
    """msgspec on the SDK's websocket: the hot path."""

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

    async def close(self) -> None:
        await _close(self._ws)


class SdkTransport:
    """Every message through the SDK's public methods and pydantic models."""

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

    async def close(self) -> None:
        await _close(self._session._ws)
