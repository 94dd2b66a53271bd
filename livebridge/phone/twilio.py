"""Twilio Media Streams messages, without I/O: text text frames in → events, and the
frames out.

Twilio sends ``connected``, ``start`` (the ``streamSid`` and media format), ``media`` (base64
μ-law, 8 kHz), ``dtmf``, ``mark`` (echoed once the audio sent before it has played) and
``stop``; the server sends ``media``, ``mark`` and ``clear`` (drop the buffered audio), each
naming the ``streamSid``. A frame that does not decode, an unknown event, a payload that is not
base64 or media before ``start`` is logged and skipped: one bad frame never ends a call.
"""

from __future__ import annotations

import base64
import binascii
import logging
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import msgspec

__all__ = [
    "Dtmf",
    "MarkEchoed",
    "MediaIn",
    "StreamEvent",
    "StreamStarted",
    "StreamStopped",
    "TwilioStream",
]

log = logging.getLogger("livebridge.phone")


@dataclass(frozen=True, slots=True)
class StreamStarted:
    """``start``: the stream's id, the call's, and the ``<Parameter>`` values of the TwiML."""

    stream_sid: str
    call_sid: str = ""
    custom_parameters: dict[str, str] = field(default_factory=dict)
    encoding: str = "audio/x-mulaw"
    rate: int = 8000


@dataclass(frozen=True, slots=True)
class MediaIn:
    """``media``: μ-law bytes from the caller; ``timestamp`` in ms since the stream began."""

    ulaw: bytes
    timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class MarkEchoed:
    """``mark``: the audio sent before the named mark has played (or was cleared)."""

    name: str


@dataclass(frozen=True, slots=True)
class Dtmf:
    """``dtmf``: the caller pressed a key."""

    digit: str


@dataclass(frozen=True, slots=True)
class StreamStopped:
    """``stop``: the caller hung up or the stream ended."""


StreamEvent: TypeAlias = StreamStarted | MediaIn | MarkEchoed | Dtmf | StreamStopped


class _Start(msgspec.Struct, rename="camel"):
    stream_sid: str = ""
    call_sid: str = ""
    custom_parameters: dict[str, Any] = msgspec.field(default_factory=dict)
    media_format: dict[str, Any] = msgspec.field(default_factory=dict)


class _Frame(msgspec.Struct, rename="camel"):
    event: str = ""
    stream_sid: str | None = None
    start: _Start | None = None
    media: dict[str, Any] | None = None
    mark: dict[str, Any] | None = None
    dtmf: dict[str, Any] | None = None


_decoder = msgspec.json.Decoder(_Frame)
_encoder = msgspec.json.Encoder()


class TwilioStream:
    """The server's side of one Media Streams WebSocket.

    ``receive(text)`` turns one frame into at most one event; ``skipped`` counts the frames
    skipped, by reason. ``media``/``mark``/``clear`` compose the outgoing frames; they need the
    ``streamSid`` that ``start`` gave.
    """

    __slots__ = ("last_skipped", "skipped", "stream_sid")

    def __init__(self) -> None:
        self.stream_sid: str | None = None
        self.skipped: dict[str, int] = {}
        self.last_skipped: str | None = None  # why the latest frame was skipped, if it was

    @property
    def started(self) -> bool:
        return self.stream_sid is not None

    def receive(self, text: str | bytes) -> StreamEvent | None:
        """The event one frame carries; None for ``connected`` and for a skipped frame."""
        self.last_skipped = None
        try:
            frame = _decoder.decode(text)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            self._skip("undecodable", f"not a Media Streams frame: {exc}")
            return None
        event = frame.event
        if event == "media":
            return self._media(frame)
        if event == "connected":
            return None
        if event == "start":
            start = frame.start or _Start()
            sid = start.stream_sid or frame.stream_sid
            if not sid:
                self._skip("bad_start", "start without a streamSid")
                return None
            self.stream_sid = sid
            fmt = start.media_format
            return StreamStarted(
                stream_sid=sid,
                call_sid=start.call_sid,
                custom_parameters={str(k): str(v) for k, v in start.custom_parameters.items()},
                encoding=str(fmt.get("encoding", "audio/x-mulaw")),
                rate=int(fmt.get("sampleRate", 8000)),
            )
        if event == "mark":
            name = (frame.mark or {}).get("name")
            if not isinstance(name, str):
                self._skip("bad_mark", "mark without a name")
                return None
            return MarkEchoed(name)
        if event == "dtmf":
            digit = (frame.dtmf or {}).get("digit")
            if not isinstance(digit, str) or not digit:
                self._skip("bad_dtmf", "dtmf without a digit")
                return None
            return Dtmf(digit)
        if event == "stop":
            return StreamStopped()
        self._skip("unknown_event", f"unknown event {event!r}")
        return None

    def _media(self, frame: _Frame) -> MediaIn | None:
        if self.stream_sid is None:
            self._skip("media_before_start", "media before start")
            return None
        media = frame.media or {}
        payload = media.get("payload")
        if not isinstance(payload, str):
            self._skip("bad_payload", "media without a payload")
            return None
        try:
            ulaw = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            self._skip("bad_payload", "media payload is not base64")
            return None
        timestamp = media.get("timestamp")
        try:
            stamp = int(timestamp) if timestamp is not None else None
        except (TypeError, ValueError):
            stamp = None
        return MediaIn(ulaw, stamp)

    def _skip(self, reason: str, detail: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        self.last_skipped = reason
        log.warning("skipped a Twilio frame: %s", detail)
        return None

    # -- frames to Twilio -----------------------------------------------------------------------

    def media(self, ulaw: bytes) -> str:
        """A ``media`` frame of μ-law bytes for the caller."""
        payload = base64.b64encode(ulaw).decode("ascii")
        frame = {"event": "media", "streamSid": self._sid(), "media": {"payload": payload}}
        return _encoder.encode(frame).decode()

    def mark(self, name: str) -> str:
        """A ``mark``: Twilio echoes it once the audio sent before it has played."""
        frame = {"event": "mark", "streamSid": self._sid(), "mark": {"name": name}}
        return _encoder.encode(frame).decode()

    def clear(self) -> str:
        """A ``clear``: Twilio drops the audio it holds (barge-in)."""
        return _encoder.encode({"event": "clear", "streamSid": self._sid()}).decode()

    def _sid(self) -> str:
        if self.stream_sid is None:
            raise RuntimeError("no streamSid yet: Twilio sends it in the start message")
        return self.stream_sid
