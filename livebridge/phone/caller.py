"""A simulated caller: the Twilio side of a Media Streams call, over a real WebSocket.

It does what Twilio does: ``connected`` and ``start``, then 20 ms of μ-law every 20 ms (speech
when told to speak, silence otherwise); it plays what it is sent at real time, echoes each mark
once the audio before it has played, drops its buffer on ``clear`` (echoing the marks it held,
as Twilio does), presses keys and hangs up with ``stop``. Speech comes from ``espeak-ng`` where
it is installed, else a tone. Everything it heard is kept with the time it was heard, for tests
and ``livebridge demo --phone``.

Given the auth token, it signs what it sends as Twilio does (``X-Twilio-Signature``): the
stream's upgrade, and the voice webhook's form POST (``ring``). What Twilio signs is the public
``https://``/``wss://`` URL; a local server is reached over ``http://``/``ws://``, as behind a
TLS-terminating proxy, so the URL signed defaults to the one dialled with the secure scheme.
"""

from __future__ import annotations

import base64
import functools
import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode
from xml.etree import ElementTree

import anyio
import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from livebridge.phone import telnyx
from livebridge.phone.audio import PHONE_RATE, SILENCE, Resampler, pcm16_to_ulaw
from livebridge.phone.playout import FRAME_BYTES, FRAME_SECONDS
from livebridge.phone.signature import HEADER, signature

#: Received audio held for playing, in frames (a minute): a server far ahead of real time
#: loses the oldest, as a phone line would not hold more either.
_MAX_BUFFERED = 3000
#: Frames gathered before a stretch starts playing (a jitter buffer, as a phone line has).
_JITTER_FRAMES = 6


@dataclass(slots=True)
class Heard:
    """A stretch of audio the caller heard without a gap: from ``start`` for ``seconds``."""

    start: float
    seconds: float

    @property
    def end(self) -> float:
        return self.start + self.seconds


def tone(seconds: float, frequency: float = 300.0, level: float = 8000.0) -> bytes:
    """μ-law 8 kHz: a tone standing in for speech."""
    t = np.arange(int(seconds * PHONE_RATE)) / PHONE_RATE
    return pcm16_to_ulaw((level * np.sin(2 * np.pi * frequency * t)).astype("<i2").tobytes())


@functools.lru_cache(maxsize=32)
def speech(text: str) -> bytes:
    """μ-law 8 kHz of ``text`` spoken by ``espeak-ng``; a tone of like length without it."""
    program = shutil.which("espeak-ng")
    if program is None:
        return tone(max(0.5, 0.06 * len(text)))
    wav = subprocess.run(
        [program, "--stdout", "-s", "190", text], capture_output=True, check=True, timeout=30
    ).stdout
    rate = int.from_bytes(wav[24:28], "little")  # a RIFF header, sizes left unset on a pipe
    pcm = wav[44 : len(wav) - (len(wav) - 44) % 2]
    resample = Resampler(rate, PHONE_RATE)
    return pcm16_to_ulaw(resample(pcm) + resample.flush())


def secure(url: str) -> str:
    """``url`` with the scheme Twilio uses: ``https://`` for ``http://``, ``wss://`` for ``ws://``."""
    for plain, tls in (("http://", "https://"), ("ws://", "wss://")):
        if url.startswith(plain):
            return tls + url.removeprefix(plain)
    return url


@dataclass(frozen=True, slots=True)
class Rung:
    """The voice webhook's answer: its HTTP status and body, and the ``<Stream>`` URL in it."""

    status: int
    body: str

    @property
    def stream_url(self) -> str | None:
        try:
            root = ElementTree.fromstring(self.body)
        except ElementTree.ParseError:
            return None
        stream = root.find("./Connect/Stream")
        return None if stream is None else stream.get("url")

    @property
    def parameters(self) -> dict[str, str]:
        """The ``<Parameter>`` values of the ``<Stream>``: its ``customParameters``."""
        try:
            root = ElementTree.fromstring(self.body)
        except ElementTree.ParseError:
            return {}
        return {
            p.get("name", ""): p.get("value", "")
            for p in root.findall("./Connect/Stream/Parameter")
        }

    @property
    def rejected(self) -> bool:
        return self.status == 200 and "<Reject" in self.body


async def ring(
    webhook: str,
    *,
    auth_token: str | None = None,
    signed_url: str | None = None,
    form: Mapping[str, str] | None = None,
    method: str = "POST",
    call_sid: str = "CA00000000000000000000000000000001",
    telnyx_key: Ed25519PrivateKey | None = None,
    timestamp: int | None = None,
) -> Rung:
    """What Twilio does when a call comes in: fetch the TwiML from ``webhook`` (a form POST of
    the call's details, or a GET), signed with ``auth_token`` over ``signed_url`` (default: the
    ``webhook`` with ``https://``). With ``telnyx_key``, what Telnyx does: the TeXML webhook
    signed with Ed25519 at ``timestamp`` (default: now)."""
    fields = (
        dict(form)
        if form is not None
        else {
            "AccountSid": "AC00000000000000000000000000000001",
            "CallSid": call_sid,
            "CallStatus": "ringing",
            "Direction": "inbound",
            "From": "+15550100",
            "To": "+15550199",
        }
    )
    body = urlencode(fields).encode() if method == "POST" else None
    request = urllib.request.Request(webhook, data=body, method=method)
    if body is not None:
        request.add_header("Content-Type", "application/x-www-form-urlencoded")
    if auth_token is not None:
        params = list(fields.items()) if body is not None else []
        signed = signature(auth_token, signed_url or secure(webhook), params)
        request.add_header(HEADER, signed)
    if telnyx_key is not None:  # Telnyx: Ed25519 over "timestamp|body"
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        signed_bytes = telnyx_key.sign(stamp.encode() + b"|" + (body or b""))
        request.add_header(telnyx.SIGNATURE_HEADER, base64.b64encode(signed_bytes).decode())
        request.add_header(telnyx.TIMESTAMP_HEADER, stamp)

    def fetch() -> Rung:
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return Rung(response.status, response.read().decode())
        except urllib.error.HTTPError as refused:
            with refused:
                return Rung(refused.code, refused.read().decode(errors="replace"))

    return await anyio.to_thread.run_sync(fetch)


@dataclass(slots=True)
class _Playback:
    """What the caller holds to play: frames and the marks between them, in order."""

    items: deque[bytes | str] = field(default_factory=deque)
    frames: int = 0


class SimulatedCaller:
    """One call's caller; open it with ``SimulatedCaller.dial(url)``."""

    def __init__(
        self, websocket: ClientConnection, stream_sid: str, provider: str = "twilio"
    ) -> None:
        self.websocket = websocket
        self.stream_sid = stream_sid
        self.provider = provider
        self._sid_field = "stream_id" if provider == "telnyx" else "streamSid"
        self.clock: Callable[[], float] = time.monotonic
        self.heard: list[Heard] = []
        self.cleared: list[float] = []  # when each clear arrived
        self.echoed: list[tuple[str, float]] = []  # each mark echoed, and when
        self.received: list[dict[str, Any]] = []  # every frame but media, as received
        self.closed_at: float | None = None  # the server closed the stream
        self.close_code: int | None = None
        self._outgoing: deque[bytes] = deque()  # μ-law frames of speech to send
        self._playback = _Playback()
        self._said = anyio.Event()
        self._changed = anyio.Event()
        self._hung_up = False

    @classmethod
    @asynccontextmanager
    async def dial(
        cls,
        url: str,
        *,
        parameters: dict[str, str] | None = None,
        stream_sid: str = "MZ00000000000000000000000000000001",
        call_sid: str = "CA00000000000000000000000000000001",
        auth_token: str | None = None,
        signed_url: str | None = None,
        provider: str = "twilio",
    ) -> AsyncIterator[SimulatedCaller]:
        """Connect to a bridge at ``url`` and start the stream; leaving hangs up. With
        ``auth_token`` the upgrade is signed over ``signed_url`` (the ``<Stream>`` URL the
        TwiML gave; default: ``url`` with ``wss://``). ``provider="telnyx"`` speaks Telnyx's
        frames instead (``url`` then carries the token the TeXML gave in its query)."""
        headers = {}
        if auth_token is not None:
            headers[HEADER] = signature(auth_token, signed_url or secure(url))
        async with connect(url, additional_headers=headers) as websocket:
            caller = cls(websocket, stream_sid, provider)
            if provider == "telnyx":
                await websocket.send(json.dumps({"event": "connected", "version": "1.0.0"}))
                start: dict[str, Any] = {
                    "call_control_id": call_sid,
                    "from": (parameters or {}).get("From", "+15550100"),
                    "to": (parameters or {}).get("To", "+15550199"),
                    "custom_parameters": parameters or {},
                    "media_format": {"encoding": "PCMU", "sample_rate": 8000, "channels": 1},
                }
            else:
                await websocket.send(json.dumps({"event": "connected", "protocol": "Call"}))
                start = {
                    "streamSid": stream_sid,
                    "accountSid": "AC00000000000000000000000000000001",
                    "callSid": call_sid,
                    "tracks": ["inbound"],
                    "customParameters": parameters or {},
                    "mediaFormat": {
                        "encoding": "audio/x-mulaw",
                        "sampleRate": 8000,
                        "channels": 1,
                    },
                }
            await caller.send({"event": "start", "start": start})
            async with anyio.create_task_group() as tg:
                tg.start_soon(caller._receive)
                tg.start_soon(caller._tick)
                try:
                    yield caller
                finally:
                    await caller.hang_up()
                    tg.cancel_scope.cancel()

    # -- what a test does --------------------------------------------------------------------

    async def say(self, ulaw: bytes) -> float:
        """Speak ``ulaw`` (8 kHz μ-law) at real time; returns when the last of it was sent."""
        for i in range(0, len(ulaw), FRAME_BYTES):
            frame = ulaw[i : i + FRAME_BYTES]
            self._outgoing.append(frame + SILENCE * (FRAME_BYTES - len(frame)))
        while self._outgoing and not self._hung_up:
            await self._said.wait()
        return self.clock()

    async def press(self, digit: str) -> None:
        await self.send({"event": "dtmf", "dtmf": {"track": "inbound_track", "digit": digit}})

    async def send(self, message: dict[str, Any]) -> None:
        """Send a frame of this stream (``streamSid``, or Telnyx's ``stream_id``, added)."""
        await self.send_raw(json.dumps({**message, self._sid_field: self.stream_sid}))

    async def send_raw(self, text: str) -> None:
        with suppress(ConnectionClosed):
            await self.websocket.send(text)

    async def hang_up(self) -> None:
        """``stop``, then close the WebSocket (once)."""
        if self._hung_up:
            return
        self._hung_up = True
        if self.provider == "telnyx":
            await self.send({"event": "stop", "stop": {"call_control_id": "", "user_id": ""}})
        else:
            await self.send({"event": "stop", "stop": {"callSid": "", "accountSid": ""}})
        await self.websocket.close()

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:  # noqa: ASYNC109
        """Wait until ``predicate()`` holds, re-checked on every frame and tick."""
        with anyio.fail_after(timeout):
            while not predicate():
                await self._changed.wait()

    @property
    def heard_seconds(self) -> float:
        return sum(stretch.seconds for stretch in self.heard)

    @property
    def buffered(self) -> float:
        """Seconds of received audio not played yet."""
        return self._playback.frames * FRAME_SECONDS

    # -- the line ----------------------------------------------------------------------------

    def _changes(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def _receive(self) -> None:
        try:
            async for text in self.websocket:
                message = json.loads(text)
                kind = message.get("event")
                if kind == "media":
                    self._buffer(base64.b64decode(message["media"]["payload"]))
                    continue
                self.received.append(message)
                if kind == "mark":
                    self._playback.items.append(str(message["mark"]["name"]))
                elif kind == "clear":
                    self.cleared.append(self.clock())
                    marks = [item for item in self._playback.items if isinstance(item, str)]
                    self._playback = _Playback()
                    for name in marks:
                        await self._echo(name)
                self._changes()
        except ConnectionClosed as closed:
            self.close_code = closed.rcvd.code if closed.rcvd else None
        else:
            self.close_code = self.websocket.close_code
        self.closed_at = self.clock()
        self._changes()

    def _buffer(self, ulaw: bytes) -> None:
        items = self._playback.items
        for i in range(0, len(ulaw), FRAME_BYTES):
            items.append(ulaw[i : i + FRAME_BYTES])
            self._playback.frames += 1
        while self._playback.frames > _MAX_BUFFERED:
            if isinstance(items.popleft(), bytes):
                self._playback.frames -= 1

    async def _echo(self, name: str) -> None:
        self.echoed.append((name, self.clock()))
        await self.send({"event": "mark", "mark": {"name": name}})

    async def _tick(self) -> None:
        """Every 20 ms: send a frame (speech or silence) and play one frame received."""
        start = self.clock()
        chunk = 0
        silence = SILENCE * FRAME_BYTES
        while not self._hung_up:
            frame = self._outgoing.popleft() if self._outgoing else silence
            timestamp = int(chunk * FRAME_SECONDS * 1000)
            chunk += 1
            media = {"track": "inbound", "chunk": str(chunk), "timestamp": str(timestamp)}
            media["payload"] = base64.b64encode(frame).decode()
            await self.send({"event": "media", "media": media})
            if not self._outgoing:
                self._said.set()
                self._said = anyio.Event()
            await self._play()
            self._changes()
            await anyio.sleep(max(0.0, start + chunk * FRAME_SECONDS - self.clock()))

    async def _play(self) -> None:
        items = self._playback.items
        while items and isinstance(items[0], str):  # the audio before it has played
            await self._echo(str(items.popleft()))
        if not items:
            return
        last = self.heard[-1] if self.heard else None
        now = self.clock()
        playing = last is not None and now - last.end < FRAME_SECONDS * 1.5
        gathering = not playing and self._playback.frames < _JITTER_FRAMES
        if gathering and not any(isinstance(item, str) for item in items):  # more is coming
            return
        items.popleft()
        self._playback.frames -= 1
        if last is not None and playing:
            last.seconds += FRAME_SECONDS
        else:
            self.heard.append(Heard(now, FRAME_SECONDS))
