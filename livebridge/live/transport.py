"""The narrow seam between a session and one Live connection, free of any SDK or socket code.

A session receives decoded server messages it never looks into (the connector's protocol reads
them: ``wire.ServerMessage`` for Gemini, ``openai_wire.ServerEvent`` for OpenAI) and sends the
few ``ClientItem``s below, so the socket work behind a ``Transport`` can be swapped
(``livebridge.live.connectors`` builds them). Every
way a connection ends surfaces as ``TransportClosed(code, reason)``; a frame that does not decode
surfaces as ``MalformedMessageError`` and the connection goes on (both from ``livebridge.errors``,
re-exported here as part of the seam).
"""

from __future__ import annotations

import ssl as ssl_module
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

import msgspec

from livebridge.errors import MalformedMessageError, TransportClosed
from livebridge.live import resume
from livebridge.vendors.gemini import wire
from livebridge.vendors.gemini.answers import tool_response

__all__ = [
    "MAX_MESSAGE_BYTES",
    "Audio",
    "ClientItem",
    "ClientKind",
    "Frames",
    "MalformedMessageError",
    "Signal",
    "Text",
    "ToolAnswers",
    "Transport",
    "TransportClosed",
    "TransportKind",
    "client_args",
    "encode_client",
    "message_kind",
]

#: ``wire``: msgspec on the SDK's websocket (fast); ``sdk``: the SDK's own receive/send.
TransportKind = Literal["wire", "sdk"]

#: Largest server message accepted (websockets' default is 1 MiB); larger frames close the
#: connection with 1009, reported as ``FrameTooLargeError`` and resumed.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024


def client_args(ssl: ssl_module.SSLContext | None = None) -> dict[str, Any]:
    """``HttpOptions.async_client_args`` for a ``genai.Client`` that runs many Live sessions.

    ``genai.Client(http_options=types.HttpOptions(async_client_args=livebridge.client_args()))``
    gives every Live websocket: no permessage-deflate (Live frames are mostly base64 audio, which
    barely compresses; deflate costs memory per session and CPU on every frame),
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
    """One ``toolResponse`` message: ``responses`` are wire dicts from ``gemini_live.encode``;
    ``encoded`` is the same list as a JSON array, when the ledger already encoded it."""

    responses: Sequence[dict[str, Any]]
    encoded: bytes | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Frames:
    """Messages a vendor's protocol composed (OpenAI's answers, ``response.create``), each sent
    as its own frame, in order. ``kind`` names them in metrics. Never queued in the outbox."""

    messages: Sequence[dict[str, Any]]
    kind: str


ClientItem: TypeAlias = Audio | Text | Signal | ToolAnswers | Frames
#: The top-level field a client item is sent as.
ClientKind = Literal["toolResponse", "realtimeInput"]


def message_kind(item: ClientItem) -> ClientKind:
    """The top-level field name the item is sent as on Gemini Live (for metrics)."""
    return "toolResponse" if isinstance(item, ToolAnswers) else "realtimeInput"


class Transport(Protocol):
    """One open Live connection, as a session sees it."""

    session_id: str | None

    async def recv(self) -> Any:
        """The next decoded server message, for the connector's protocol to read; raises
        ``TransportClosed`` or ``MalformedMessageError``."""
        ...

    async def send(self, item: ClientItem) -> None:
        """Send one client message; raises ``TransportClosed`` when the connection ended."""
        ...

    async def close(self) -> None:
        """Close the connection normally (websocket code 1000), within a few seconds: a peer
        that does not answer the closing handshake in time is cut off."""
        ...


class ProvesReads(Protocol):
    """A transport that can tell when the peer has read what was sent (optional: the shell
    looks for ``read_by_peer``). Without it, any later server message counts as proof."""

    async def read_by_peer(self) -> None:
        """Return once the peer has read every message sent before the call; raises
        ``TransportClosed``."""
        ...


class _AudioBlob(msgspec.Struct, rename="camel"):
    mime_type: str
    data: bytes  # msgspec writes standard base64


class _RealtimeAudio(msgspec.Struct, rename="camel"):
    audio: _AudioBlob


class _AudioMessage(msgspec.Struct, rename="camel"):
    realtime_input: _RealtimeAudio


#: A ``toolResponse`` frame up to its list of responses (``tool_response``'s shape).
_TOOL_RESPONSE_HEAD = b'{"toolResponse":{"functionResponses":'
_SIGNALS: dict[str, bytes] = {
    "activity_start": b'{"realtimeInput":{"activityStart":{}}}',
    "activity_end": b'{"realtimeInput":{"activityEnd":{}}}',
    "audio_stream_end": b'{"realtimeInput":{"audioStreamEnd":true}}',
}


def encode_client(item: ClientItem) -> bytes:
    """The Gemini Live JSON frame for ``item``, in the camelCase the service documents."""
    if isinstance(item, Frames):
        raise TypeError("Gemini Live sends no vendor frames; Frames come from another protocol")
    if isinstance(item, Audio):
        blob = _AudioBlob(mime_type=f"audio/pcm;rate={item.rate}", data=item.pcm)
        return wire.encode(_AudioMessage(_RealtimeAudio(blob)))
    if isinstance(item, ToolAnswers):
        if item.encoded is not None:  # the array the ledger measured: framed, not re-encoded
            return b"".join((_TOOL_RESPONSE_HEAD, item.encoded, b"}}"))
        return wire.encode(tool_response(item.responses))
    if isinstance(item, Text):
        return wire.encode({"realtimeInput": {"text": item.text}})
    return _SIGNALS[item.kind]
