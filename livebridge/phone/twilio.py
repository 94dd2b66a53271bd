"""Twilio Media Streams messages, without I/O: text frames in → events, and the frames out.

Twilio sends ``connected``, ``start`` (the ``streamSid`` and media format), ``media`` (base64
μ-law, 8 kHz), ``dtmf``, ``mark`` (echoed once the audio sent before it has played) and
``stop``; the server sends ``media``, ``mark`` and ``clear`` (drop the buffered audio), each
naming the ``streamSid``.

Each frame is decoded into a typed structure of the documented shape, so a value of the wrong
type, a missing field or nesting deeper than any frame has is a decoding error, not an exception
later. Fields the bridge does not read are not checked. A frame that is not of the documented
shape, an unknown event, a payload that is not base64, media before ``start`` or a second
``start`` is one skipped frame, counted by reason and logged (at most one warning every
``LOG_INTERVAL`` seconds per stream): one bad frame never ends a call, and ``receive`` never
raises.
"""

from __future__ import annotations

import binascii
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, TypeAlias

import msgspec

log = logging.getLogger("livebridge.phone")

#: Seconds between two warnings about skipped frames on one stream: a flood is counted, and
#: the next warning says how many were skipped in between.
LOG_INTERVAL = 10.0

#: The one media format a bidirectional stream carries, and the only one the bridge plays.
ENCODING = "audio/x-mulaw"
RATE = 8000


@dataclass(frozen=True, slots=True)
class StreamStarted:
    """``start``: the stream's id, the call's, and the ``<Parameter>`` values of the TwiML."""

    stream_sid: str
    call_sid: str = ""
    custom_parameters: dict[str, str] = field(default_factory=dict)
    encoding: str = ENCODING
    rate: int = RATE


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


# -- the frames Twilio sends, as documented (twilio.com/docs/voice/media-streams/websocket-messages)


class _Frame(msgspec.Struct, tag_field="event", rename="camel", kw_only=True):
    stream_sid: str | None = None


class _Connected(_Frame, tag="connected"):
    pass


class _MediaFormat(msgspec.Struct, rename="camel", frozen=True):
    encoding: str = ENCODING
    sample_rate: int = RATE
    channels: int = 1


class _StartBody(msgspec.Struct, rename="camel", frozen=True):
    stream_sid: str = ""
    call_sid: str = ""
    custom_parameters: dict[str, str] = {}
    media_format: _MediaFormat = _MediaFormat()


class _Start(_Frame, tag="start"):
    start: _StartBody = _StartBody()


class _MediaBody(msgspec.Struct, frozen=True):
    payload: str
    timestamp: str | int | None = None  # a string of digits, as Twilio sends it, or a number


class _Media(_Frame, tag="media"):
    media: _MediaBody


class _MarkBody(msgspec.Struct, frozen=True):
    name: str


class _Mark(_Frame, tag="mark"):
    mark: _MarkBody


class _DtmfBody(msgspec.Struct, frozen=True):
    digit: Annotated[str, msgspec.Meta(pattern="^[0-9A-D*#]$")]


class _Dtmf(_Frame, tag="dtmf"):
    dtmf: _DtmfBody


class _StopBody(msgspec.Struct, frozen=True):
    pass  # accountSid and callSid: not read


class _Stop(_Frame, tag="stop"):
    stop: _StopBody | None = None


class _Envelope(msgspec.Struct, frozen=True):
    """Only the event's name: why a frame that did not decode was skipped."""

    event: str | None = None


_FRAMES = {"connected", "start", "media", "mark", "dtmf", "stop"}
_decoder = msgspec.json.Decoder(_Connected | _Start | _Media | _Mark | _Dtmf | _Stop)
_envelope = msgspec.json.Decoder(_Envelope)
_encoder = msgspec.json.Encoder()
#: What decoding raises on a frame that is not one: not JSON, not of the shape (ValidationError
#: is a DecodeError), nested past the decoder's depth, or a str that is not Unicode text.
_UNDECODABLE = (msgspec.DecodeError, RecursionError, UnicodeError)
#: What ``binascii.a2b_base64`` raises on a payload that is not base64 (``ValueError``: a str
#: that is not ASCII).
_NOT_BASE64 = (binascii.Error, ValueError)
#: A ``media`` frame after its payload: every outgoing media frame is the same JSON around a
#: different base64 payload, so only the payload is encoded per frame.
MEDIA_TAIL = '"}}'


def encode_payload(ulaw: bytes | memoryview) -> str:
    """The base64 text of μ-law bytes, as a media frame carries it."""
    return binascii.b2a_base64(ulaw, newline=False).decode("ascii")


def decode_payload(text: str) -> bytes:
    """The μ-law bytes of a media frame's base64 payload; strict: characters outside the
    alphabet or padding out of place raise ``binascii.Error`` (or ``ValueError``)."""
    return binascii.a2b_base64(text, strict_mode=True)


class TwilioStream:
    """The server's side of one Media Streams WebSocket.

    ``receive(text)`` turns one frame into at most one event; ``skipped`` counts the frames
    skipped, by reason. ``media``/``mark``/``clear`` compose the outgoing frames; they need the
    ``streamSid`` that ``start`` gave.
    """

    __slots__ = (
        "_clock",
        "_logged_at",
        "_media_head",
        "_media_sid",
        "_unlogged",
        "last_skipped",
        "skipped",
        "stream_sid",
    )

    PROVIDER = "Twilio"

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream_sid: str | None = None
        self.skipped: dict[str, int] = {}
        self.last_skipped: str | None = None  # why the latest frame was skipped, if it was
        self._clock = clock
        self._logged_at: float | None = None
        self._unlogged = 0  # skipped since the latest warning
        self._media_sid: str | None = None  # the streamSid ``_media_head`` names
        self._media_head = ""

    @property
    def started(self) -> bool:
        return self.stream_sid is not None

    def receive(self, text: str | bytes) -> StreamEvent | None:
        """The event one frame carries; None for ``connected`` and for a skipped frame."""
        self.last_skipped = None
        try:
            frame = _decoder.decode(text)
        except _UNDECODABLE as exc:
            self._undecodable(text, exc)
            return None
        match frame:
            case _Media():
                return self._media(frame.media)
            case _Start():
                return self._start(frame)
            case _Mark():
                return MarkEchoed(frame.mark.name)
            case _Dtmf():
                return Dtmf(frame.dtmf.digit)
            case _Stop():
                return StreamStopped()
        return None  # connected

    def _undecodable(self, text: str | bytes, exc: Exception) -> None:
        try:
            event = _envelope.decode(text).event
        except _UNDECODABLE:
            event = None
        if event is None:
            reason, what = "undecodable", "not a Media Streams frame"
        elif event in _FRAMES:
            reason, what = f"bad_{event}", f"a {event} frame not of the documented shape"
        else:
            reason, what = "unknown_event", f"unknown event {event[:40]!r}"
        self._skip(reason, f"{what}: {str(exc)[:200]}")

    def _start(self, frame: _Start) -> StreamStarted | None:
        start = frame.start
        sid = start.stream_sid or frame.stream_sid
        if not sid:
            self._skip("bad_start", "start without a streamSid")
            return None
        if self.stream_sid is not None:
            self._skip("repeated_start", "a second start on one stream")
            return None
        fmt = start.media_format
        if (fmt.encoding, fmt.sample_rate, fmt.channels) != (ENCODING, RATE, 1):
            self._skip(
                "bad_start",
                f"the stream carries {fmt.encoding[:40]!r} at {fmt.sample_rate} Hz, "
                f"{fmt.channels} channel(s); the bridge takes {ENCODING} at {RATE} Hz, mono",
            )
            return None
        self.stream_sid = sid
        return StreamStarted(sid, start.call_sid, dict(start.custom_parameters))

    def _media(self, media: _MediaBody) -> MediaIn | None:
        if self.stream_sid is None:
            self._skip("media_before_start", "media before start")
            return None
        try:
            ulaw = decode_payload(media.payload)
        except _NOT_BASE64:
            self._skip("bad_payload", "media payload is not base64")
            return None
        stamp = media.timestamp
        if isinstance(stamp, str):
            if not (stamp.isascii() and stamp.isdigit() and len(stamp) <= 18):
                self._skip("bad_media", "media timestamp is not a number of ms")
                return None
            stamp = int(stamp)
        elif stamp is not None and stamp < 0:
            self._skip("bad_media", "media timestamp is negative")
            return None
        return MediaIn(ulaw, stamp)

    def _skip(self, reason: str, detail: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        self.last_skipped = reason
        now = self._clock()
        if self._logged_at is not None and now - self._logged_at < LOG_INTERVAL:
            self._unlogged += 1
            return
        more = f" ({self._unlogged} more skipped since the last warning)" if self._unlogged else ""
        log.warning("skipped a %s frame: %s%s", self.PROVIDER, detail, more)
        self._logged_at = now
        self._unlogged = 0

    # -- frames to Twilio -----------------------------------------------------------------------

    def media(self, ulaw: bytes) -> str:
        """A ``media`` frame of μ-law bytes for the caller: the frame's JSON up to the payload
        is encoded once per stream, and only the payload per frame."""
        sid = self.stream_sid
        if sid is None or sid is not self._media_sid:
            head = {"event": "media", "streamSid": self._sid(), "media": {"payload": ""}}
            self._media_head = _encoder.encode(head).decode().removesuffix(MEDIA_TAIL)
            self._media_sid = sid
        return f"{self._media_head}{encode_payload(ulaw)}{MEDIA_TAIL}"

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
