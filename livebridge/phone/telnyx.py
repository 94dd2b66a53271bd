"""Telnyx media streaming, without I/O: its frames in → the bridge's stream events, and the
frames out; its webhook signatures; the token that lets a stream in.

Telnyx sends ``connected``, ``start`` (``stream_id``; ``call_control_id``, ``from``, ``to``,
``custom_parameters`` and ``media_format`` under ``start``), ``media`` (``media.payload``
base64 μ-law with ``track``, ``chunk`` and ``timestamp``; their order is not guaranteed),
``dtmf``, ``mark`` (echoed once the audio before it has played, or at once on ``clear``),
``error`` and ``stop``; in bidirectional RTP mode the server sends ``{"event": "media",
"media": {"payload"}}``, ``{"event": "mark", "mark": {"name"}}`` and ``{"event": "clear"}``
(https://developers.telnyx.com/api-reference/websockets/stream-call-media-over-websocket).
A chunk that arrives after a later one is skipped (``late_media``): 20 ms dropped rather than
played out of order. As with Twilio's codec, a frame not of the documented shape is one skipped
frame, never an exception.

Telnyx signs its webhooks with Ed25519: ``telnyx-signature-ed25519`` is the base64 signature
of ``"{telnyx-timestamp}|{raw body}"`` under the account's public key (``TELNYX_PUBLIC_KEY``,
base64), and a timestamp more than ``TOLERANCE`` seconds away is refused (a replay). The stream's
WebSocket upgrade carries no signature, so the signed webhook's answer gives a stream URL with a
``token``: an HMAC, under the server's secret, of the call and an expiry ``TOKEN_SECONDS``
ahead. A stream without a valid, unexpired token is refused.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from typing import Annotated

import msgspec
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from livebridge.errors import UsageError
from livebridge.phone.twilio import (
    MEDIA_TAIL,
    Dtmf,
    MarkEchoed,
    MediaIn,
    StreamEvent,
    StreamStarted,
    StreamStopped,
    TwilioStream,
    decode_payload,
    encode_payload,
)

SIGNATURE_HEADER = "telnyx-signature-ed25519"
TIMESTAMP_HEADER = "telnyx-timestamp"
#: Seconds a webhook's timestamp may be from now (Telnyx recommends 5 minutes).
TOLERANCE = 300
#: Seconds a stream URL's token stays valid after the webhook answered.
TOKEN_SECONDS = 60

ENCODING = "PCMU"
RATE = 8000


class _Frame(msgspec.Struct, tag_field="event", kw_only=True):
    stream_id: str | None = None
    sequence_number: str | int | None = None


class _Connected(_Frame, tag="connected"):
    pass


class _MediaFormat(msgspec.Struct, frozen=True):
    encoding: str = ENCODING
    sample_rate: int = RATE
    channels: int = 1


class _StartBody(msgspec.Struct, frozen=True):
    call_control_id: str = ""
    caller: str = msgspec.field(default="", name="from")
    called: str = msgspec.field(default="", name="to")
    custom_parameters: dict[str, str] = {}
    media_format: _MediaFormat = _MediaFormat()


class _Start(_Frame, tag="start"):
    start: _StartBody = _StartBody()


class _MediaBody(msgspec.Struct, frozen=True):
    payload: str
    track: str = "inbound"
    chunk: str | int | None = None
    timestamp: str | int | None = None


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


class _Stop(_Frame, tag="stop"):
    pass


class _Error(_Frame, tag="error"):
    pass


_decoder = msgspec.json.Decoder(_Connected | _Start | _Media | _Mark | _Dtmf | _Stop | _Error)
_encoder = msgspec.json.Encoder()
#: An outgoing ``media`` frame up to its payload: the same bytes for every frame.
_MEDIA_HEAD = (
    _encoder.encode({"event": "media", "media": {"payload": ""}}).decode().removesuffix(MEDIA_TAIL)
)
_UNDECODABLE = (msgspec.DecodeError, RecursionError, UnicodeError)


def _number(value: str | int | None) -> int | None:
    if isinstance(value, int):
        return value if value >= 0 else None
    if value is not None and value.isascii() and value.isdigit() and len(value) <= 18:
        return int(value)
    return None


class TelnyxStream(TwilioStream):
    """The server's side of one Telnyx media-streaming WebSocket (the bridge's ``codec``)."""

    __slots__ = ("_chunk",)

    PROVIDER = "Telnyx"

    def __init__(self) -> None:
        super().__init__()
        self._chunk = 0  # the highest media chunk taken

    def receive(self, text: str | bytes) -> StreamEvent | None:
        self.last_skipped = None
        try:
            frame = _decoder.decode(text)
        except _UNDECODABLE as exc:
            self._undecodable(text, exc)
            return None
        match frame:
            case _Media():
                return self._telnyx_media(frame.media)
            case _Start():
                return self._telnyx_start(frame)
            case _Mark():
                return MarkEchoed(frame.mark.name)
            case _Dtmf():
                return Dtmf(frame.dtmf.digit)
            case _Stop():
                return StreamStopped()
            case _Error():
                self._skip("provider_error", "Telnyx reported an error on the stream")
        return None  # connected

    def _telnyx_start(self, frame: _Start) -> StreamStarted | None:
        start = frame.start
        if not frame.stream_id:
            self._skip("bad_start", "start without a stream_id")
            return None
        if self.stream_sid is not None:
            self._skip("repeated_start", "a second start on one stream")
            return None
        fmt = start.media_format
        if (fmt.encoding.upper(), fmt.sample_rate, fmt.channels) != (ENCODING, RATE, 1):
            self._skip(
                "bad_start",
                f"the stream carries {fmt.encoding[:40]!r} at {fmt.sample_rate} Hz, "
                f"{fmt.channels} channel(s); the bridge takes {ENCODING} at {RATE} Hz, mono",
            )
            return None
        self.stream_sid = frame.stream_id
        params = {"From": start.caller, "To": start.called, **start.custom_parameters}
        return StreamStarted(frame.stream_id, start.call_control_id, params)

    def _telnyx_media(self, media: _MediaBody) -> MediaIn | None:
        if self.stream_sid is None:
            self._skip("media_before_start", "media before start")
            return None
        if media.track != "inbound":
            self._skip("outbound_track", "media of the outbound track")
            return None
        chunk = _number(media.chunk)
        if chunk is not None:
            if chunk <= self._chunk:
                self._skip("late_media", f"media chunk {chunk} after chunk {self._chunk}")
                return None
            self._chunk = chunk
        try:
            ulaw = decode_payload(media.payload)
        except (binascii.Error, ValueError):
            self._skip("bad_payload", "media payload is not base64")
            return None
        return MediaIn(ulaw, _number(media.timestamp))

    # -- frames to Telnyx -----------------------------------------------------------------------

    def media(self, ulaw: bytes) -> str:
        return f"{_MEDIA_HEAD}{encode_payload(ulaw)}{MEDIA_TAIL}"

    def mark(self, name: str) -> str:
        return _encoder.encode({"event": "mark", "mark": {"name": name}}).decode()

    def clear(self) -> str:
        return _encoder.encode({"event": "clear"}).decode()


# -- requests ---------------------------------------------------------------------------------


def public_key(text: str) -> Ed25519PublicKey:
    """The account's public key from its base64 (``TELNYX_PUBLIC_KEY``); ``UsageError`` if it
    is not one."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
        return Ed25519PublicKey.from_public_bytes(raw)
    except (binascii.Error, ValueError):
        raise UsageError(
            "the Telnyx public key must be the base64 of a 32-byte Ed25519 key "
            "(Mission Control: Account Settings → Keys & Credentials → Public Key)"
        ) from None


def is_signed(
    key: Ed25519PublicKey,
    signature: str | None,
    timestamp: str | None,
    body: bytes,
    now: float | None = None,
) -> bool:
    """Whether ``signature`` is Telnyx's over ``timestamp|body``, the timestamp recent."""
    if not signature or not timestamp or not (timestamp.isascii() and timestamp.isdigit()):
        return False
    if (
        len(timestamp) > 12
        or abs((time.time() if now is None else now) - int(timestamp)) > TOLERANCE
    ):
        return False
    try:
        key.verify(base64.b64decode(signature, validate=True), timestamp.encode() + b"|" + body)
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True


def stream_token(secret: bytes, call: str, expires: int) -> str:
    """The token of a stream URL: the call and its expiry, under the server's secret."""
    digest = hmac.new(secret, f"{call}|{expires}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def token_valid(
    secret: bytes, call: str, expires: str, token: str, now: float | None = None
) -> bool:
    """Whether a stream URL's ``token`` is ours and unexpired (compared in constant time)."""
    if not (expires.isascii() and expires.isdigit() and len(expires) <= 12):
        return False
    if int(expires) < (time.time() if now is None else now):
        return False
    wanted = stream_token(secret, call, int(expires)).encode()
    return hmac.compare_digest(wanted, token.encode("utf-8", "replace"))
