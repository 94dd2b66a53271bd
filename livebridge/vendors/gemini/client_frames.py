"""Gemini Live's client frames: what a ``ClientItem`` becomes on the websocket, and the websocket
settings (``client_args``) a ``genai.Client`` should give every Live connection."""

from __future__ import annotations

import ssl as ssl_module
from typing import Any, Literal

import msgspec

from livebridge.protocol import resume
from livebridge.protocol.transport import (
    MAX_MESSAGE_BYTES,
    Audio,
    ClientItem,
    Frames,
    Text,
    ToolAnswers,
)
from livebridge.vendors.gemini import wire
from livebridge.vendors.gemini.answers import tool_response

#: The top-level field a client item is sent as.
ClientKind = Literal["toolResponse", "realtimeInput"]


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


def message_kind(item: ClientItem) -> ClientKind:
    """The top-level field name the item is sent as on Gemini Live (for metrics)."""
    return "toolResponse" if isinstance(item, ToolAnswers) else "realtimeInput"


_TOOL_RESPONSE: tuple[ClientKind] = ("toolResponse",)
_REALTIME_INPUT: tuple[ClientKind] = ("realtimeInput",)


def client_kinds(item: ClientItem) -> tuple[ClientKind]:
    """``message_kind`` as the one-item sequence protocols count (an item is one frame)."""
    return _TOOL_RESPONSE if isinstance(item, ToolAnswers) else _REALTIME_INPUT


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
