"""The narrow seam between a ``LiveSession`` and one Live connection.

A session only ever receives ``wire.ServerMessage``s and sends the few client messages below, so
the socket work behind it can be swapped:

- ``WireTransport`` (the default): the google-genai SDK opens the connection (endpoint,
  authentication, setup), then every message is encoded and decoded with the msgspec codec in
  ``livebridge.wire`` directly on the SDK's websocket: no per-message model validation.
- ``SdkTransport``: every message goes through the SDK's own ``receive()`` and ``send_*``
  methods. Slower, but it relies on nothing but the SDK's public API.

Both turn every way a connection can end into ``TransportClosed(code, reason)``.
"""

from __future__ import annotations

import ssl as ssl_module
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias

import msgspec
from google.genai import errors as genai_errors
from google.genai import live as genai_live
from google.genai import types
from websockets.exceptions import ConnectionClosed

from livebridge import resume, wire
from livebridge.adapters.gemini_live import to_sdk, tool_response

TransportKind = Literal["wire", "sdk"]

#: Largest server message accepted (websockets' default is 1 MiB).
MAX_MESSAGE_BYTES = 4 * 1024 * 1024


def client_args(ssl: ssl_module.SSLContext | None = None) -> dict[str, Any]:
    """``HttpOptions.async_client_args`` for a ``genai.Client`` that runs many Live sessions.

    ``genai.Client(http_options=types.HttpOptions(async_client_args=livebridge.client_args()))``
    gives every Live websocket: no permessage-deflate (Live frames are mostly base64 audio, which
    barely compresses; deflate costs about 50 KB of memory per session and CPU on every frame),
    keepalive from ``resume.keepalive_settings()`` and a ``MAX_MESSAGE_BYTES`` message limit. The
    SDK passes these to ``websockets`` and drops them for its HTTP client. ``ssl`` is the
    context to trust (default: the SDK's own).
    """
    args: dict[str, Any] = {
        "compression": None,
        "max_size": MAX_MESSAGE_BYTES,
        **resume.keepalive_settings(),
    }
    if ssl is not None:
        args["ssl"] = ssl
    return args


class TransportClosed(Exception):
    """The connection ended; ``code``/``reason`` are the close frame's (1006 when none came)."""

    def __init__(self, code: int | None, reason: str) -> None:
        super().__init__(f"connection closed ({code}): {reason or 'no reason given'}")
        self.code = code
        self.reason = reason


class MalformedMessage(ValueError):
    """A server frame that is not a valid Live message; the connection itself is fine."""


@dataclass(frozen=True, slots=True)
class Audio:
    pcm: bytes
    rate: int = 16_000


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Signal:
    """A content-free realtime input: activity start/end or the end of the audio stream."""

    kind: Literal["activity_start", "activity_end", "audio_stream_end"]


@dataclass(frozen=True, slots=True)
class ToolAnswers:
    """One ``toolResponse`` message: ``responses`` are wire dicts from ``gemini_live.encode``."""

    responses: Sequence[dict[str, Any]]


ClientItem: TypeAlias = Audio | Text | Signal | ToolAnswers


def message_kind(item: ClientItem) -> str:
    """The top-level field name the item is sent as (for metrics)."""
    return "toolResponse" if isinstance(item, ToolAnswers) else "realtimeInput"


class Transport(Protocol):
    session_id: str | None

    async def recv(self) -> wire.ServerMessage: ...

    async def send(self, item: ClientItem) -> None: ...


def _closed(exc: ConnectionClosed) -> TransportClosed:
    if exc.rcvd is not None:
        return TransportClosed(exc.rcvd.code, exc.rcvd.reason)
    return TransportClosed(1006, "connection lost without a close frame")


# The wire transport ---------------------------------------------------------------------------


class _AudioBlob(msgspec.Struct, rename="camel"):
    mime_type: str
    data: bytes  # msgspec writes standard base64


class _RealtimeAudio(msgspec.Struct, rename="camel"):
    audio: _AudioBlob


class _AudioMessage(msgspec.Struct, rename="camel"):
    realtime_input: _RealtimeAudio


_SIGNALS: dict[str, bytes] = {
    "activity_start": b'{"realtimeInput":{"activityStart":{}}}',
    "activity_end": b'{"realtimeInput":{"activityEnd":{}}}',
    "audio_stream_end": b'{"realtimeInput":{"audioStreamEnd":true}}',
}


def encode_client(item: ClientItem) -> bytes:
    """The JSON frame for ``item``, in the camelCase the service documents."""
    if isinstance(item, Audio):
        blob = _AudioBlob(mime_type=f"audio/pcm;rate={item.rate}", data=item.pcm)
        return wire.encode(_AudioMessage(_RealtimeAudio(blob)))
    if isinstance(item, ToolAnswers):
        return wire.encode(tool_response(item.responses))
    if isinstance(item, Text):
        return wire.encode({"realtimeInput": {"text": item.text}})
    return _SIGNALS[item.kind]


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
            raise MalformedMessage(f"{exc}: {bytes(frame[:200])!r}") from None

    async def send(self, item: ClientItem) -> None:
        try:
            await self._ws.send(encode_client(item), text=True)
        except ConnectionClosed as exc:
            raise _closed(exc) from None


# The SDK transport ----------------------------------------------------------------------------


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
            raise MalformedMessage(str(exc)) from None
        except genai_errors.APIError as exc:
            raise TransportClosed(exc.code, exc.details or exc.message or "") from None
        except ConnectionClosed as exc:
            raise _closed(exc) from None
        raw = message.model_dump(mode="json", by_alias=True, exclude_none=True)
        try:
            return msgspec.convert(raw, wire.ServerMessage, strict=False)
        except ValueError as exc:
            raise MalformedMessage(str(exc)) from None

    async def send(self, item: ClientItem) -> None:
        session = self._session
        try:
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


def open_transport(kind: TransportKind, session: genai_live.AsyncSession) -> Transport:
    """The transport of ``kind`` over a connected SDK session."""
    return WireTransport(session) if kind == "wire" else SdkTransport(session)
