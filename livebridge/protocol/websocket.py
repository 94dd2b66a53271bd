"""What every connector does to the ``websockets`` connection its SDK opened, vendor-free:
closing it within a bound, mapping its close to ``TransportClosed``, shrinking its TLS buffer,
proving reads with a ping, and carrying a vendor's msgspec frames (``FrameTransport``)."""

from __future__ import annotations

import asyncio
import itertools
import os
import struct
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

import anyio
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from livebridge.errors import ConnectTimeoutError, TransportClosed
from livebridge.protocol import resume
from livebridge.protocol.transport import ClientItem

try:  # websockets' C masking, as its own frames use
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover (a build without its C extension)
    from websockets.utils import apply_mask

Message = TypeVar("Message")

#: How long a normal close waits for the server's half of the closing handshake.
CLOSE_SECONDS = 2.0

_TOO_BIG = 1009  # websockets closes with it when a frame exceeds max_size


async def close(ws: Any) -> None:
    """Close with 1000; a server that does not answer in time (it stopped reading) is cut off."""
    with anyio.move_on_after(CLOSE_SECONDS):
        await ws.close()
        return
    ws.transport.abort()


def host_of(url: object) -> str:
    """The ``host:port`` of a base URL, for messages (the URL itself if it has none)."""
    text = str(url or "")
    return urlsplit(text).netloc or text or "the service"


def opening_timed_out(host: str, timeout: float, unanswered: str) -> TransportClosed:
    """A connection that did not open within ``timeout`` s (``unanswered``: what got no
    answer): the ``ConnectTimeoutError`` the app is told, on the ``TransportClosed`` the session
    reads as a drop (a resumption is retried)."""
    error = ConnectTimeoutError(
        f"{host} did not open the Live session within {timeout:g} s: {unanswered} got no "
        "answer. If the service is only slow, raise SessionOptions.connect_timeout; else check "
        "the address and the service's status",
        host=host,
        timeout=timeout,
    )
    reason = f"not open within {timeout:g} s: {unanswered} got no answer"
    return TransportClosed(None, reason, error=error)


def closed(exc: ConnectionClosed) -> TransportClosed:
    """The ``TransportClosed`` for a websockets close: the server's code, or 1009 / 1006."""
    if exc.rcvd is not None and not (exc.sent is not None and exc.sent.code == _TOO_BIG):
        return TransportClosed(exc.rcvd.code, exc.rcvd.reason)
    if exc.sent is not None and exc.sent.code == _TOO_BIG:
        reason = exc.sent.reason
        return TransportClosed(_TOO_BIG, reason, error=resume.frame_too_large(reason))
    return TransportClosed(1006, "connection lost without a close frame")


async def ping_behind(ws: Any) -> asyncio.Future[Any]:
    """Send a ping behind every frame sent so far; its pong (the future returned) proves the peer
    has read them all: websocket peers answer pings in order. Raises ``TransportClosed``."""
    try:
        pong: asyncio.Future[Any] = await ws.ping()
    except ConnectionClosed as exc:
        raise closed(exc) from None
    return pong


#: Payloads of the pings ``send_and_ping`` sends: 8 bytes, never one of websockets' own 4.
_PING_NUMBERS = itertools.count()
_TEXT, _PING = 0x81, 0x89  # a frame's first byte: FIN and the opcode


def _frame_head(first: int, length: int) -> bytes:
    """A masked client frame's header up to its mask (RFC 6455, 5.2)."""
    if length < 126:
        return bytes((first, 0x80 | length))
    if length < 65_536:
        return struct.pack("!BBH", first, 0xFE, length)
    return struct.pack("!BBQ", first, 0xFF, length)


async def send_and_ping(ws: Any, frames: Sequence[bytes]) -> asyncio.Future[Any]:
    """Send ``frames`` (text messages) with a ping right behind them, all in one write: one
    TLS record and one system call where a send and a ``ping_behind`` take two of each. The
    pong (the future returned) proves the peer has read them. A connection that is not
    websockets' asyncio one sends and pings apart. Raises ``TransportClosed``.

    On an open connection without extensions the frames are masked and framed here, in one
    buffer with one call for their masks' random bytes: websockets' own ``Frame`` and its
    serialisation cost more than the frames themselves; any other state takes its path."""
    try:
        protocol: Any = getattr(ws, "protocol", None)
        if not hasattr(ws, "pending_pings") or not hasattr(protocol, "writes"):
            for frame in frames:
                await ws.send(frame, text=True)
            return await ping_behind(ws)
        async with ws.send_context():  # on exit it writes what the protocol queued, once
            data = next(_PING_NUMBERS).to_bytes(8, "big")
            pong: asyncio.Future[Any] = ws.loop.create_future()
            if (
                protocol.state is State.OPEN
                and not protocol.expect_continuation_frame
                and not protocol.extensions
                and not protocol.debug
            ):
                masks = os.urandom(4 * len(frames) + 4)
                parts: list[bytes] = []
                for index, frame in enumerate(frames):
                    mask = masks[4 * index : 4 * index + 4]
                    parts += (_frame_head(_TEXT, len(frame)), mask, apply_mask(frame, mask))
                mask = masks[-4:]
                parts += (_frame_head(_PING, 8), mask, apply_mask(data, mask))
                protocol.writes.append(b"".join(parts))
            else:
                for frame in frames:
                    protocol.send_text(frame)
                protocol.send_ping(data)
            ws.pending_pings[data] = (pong, ws.loop.time())
            writes = protocol.writes
            if len(writes) > 1 and all(writes):  # an empty one would mean "half-close"
                protocol.writes = [b"".join(writes)]
    except ConnectionClosed as exc:
        raise closed(exc) from None
    return pong


def shrink_tls_read_buffer(transport: Any, size: int) -> bool:
    """Give an asyncio TLS transport a ``size``-byte read buffer; False if it has none.

    Safe between reads: the event loop asks for the buffer and fills it in one step.
    """
    protocol = getattr(transport, "_ssl_protocol", None)
    if protocol is None or not hasattr(protocol, "_ssl_buffer"):
        return False
    protocol.max_size = size
    if len(protocol._ssl_buffer) == size:  # already that size: keep it, allocate nothing
        return True
    buffer = bytearray(size)
    protocol._ssl_buffer = buffer
    protocol._ssl_buffer_view = memoryview(buffer)
    return True


class FrameTransport(Generic[Message]):
    """A vendor's msgspec frames directly on the SDK's websocket (the hot path): each frame
    received is ``decode``d, each item sent goes out as ``frames(item)``; messages the opening
    already read (``early``) come first."""

    def __init__(
        self,
        ws: Any,
        session_id: str | None,
        early: list[Message],
        decode: Callable[[bytes], Message],
        frames: Callable[[ClientItem], list[bytes]],
    ) -> None:
        self.session_id = session_id
        self._ws = ws
        self._early = early
        self._decode = decode
        self._frames = frames

    async def recv(self) -> Message:
        if self._early:
            return self._early.pop(0)
        try:
            frame = await self._ws.recv(decode=False)
        except ConnectionClosed as exc:
            raise closed(exc) from None
        return self._decode(frame)

    async def send(self, item: ClientItem) -> None:
        try:
            for frame in self._frames(item):
                await self._ws.send(frame, text=True)
        except ConnectionClosed as exc:
            raise closed(exc) from None

    async def close(self) -> None:
        await close(self._ws)

    async def ping_behind(self) -> asyncio.Future[Any]:
        return await ping_behind(self._ws)

    async def send_proven(self, item: ClientItem) -> asyncio.Future[Any]:
        return await send_and_ping(self._ws, self._frames(item))
