"""The narrow seam between a session and one Live connection, free of any SDK or socket code.

A session receives decoded server messages it never looks into (the connector's protocol reads
them) and sends the few ``ClientItem``s below, so the socket work behind a ``Transport`` can be
swapped (``livebridge.live.vendors`` builds them). Each vendor's transport frames the items in
its own words (``livebridge.vendors.<vendor>``); nothing here knows a vendor. Every way a
connection ends surfaces as ``TransportClosed(code, reason)``; a frame that does not decode
surfaces as ``MalformedMessageError`` and the connection goes on (both from ``livebridge.errors``,
re-exported here as part of the seam).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, TypeAlias

#: The TLS read buffer each connection gets in place of asyncio's 256 KiB (0 keeps asyncio's).
TLS_READ_BUFFER: Final = 8 * 1024
#: How long opening one connection may take, handshake and session setup together.
CONNECT_SECONDS: Final = 10.0

#: ``wire``: msgspec on the SDK's websocket (fast); ``sdk``: the SDK's own receive/send.
TransportKind = Literal["wire", "sdk"]

#: Largest server message accepted (websockets' default is 1 MiB); larger frames close the
#: connection with 1009, reported as ``FrameTooLargeError`` and resumed.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024


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
    """The ledger's answers as one message: ``responses`` are the wire dicts its encoder made;
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
    looks for ``ping_behind``). Without it, any later server message counts as proof."""

    async def ping_behind(self) -> asyncio.Future[Any]:
        """Send a ping now; the future returned completes once the peer has read every message
        sent before it (a connection that ends sets an exception on it, or cancels it). Raises
        ``TransportClosed``."""
        ...

    # Optional, where the ping can share the write of the message it proves (one TLS record):
    # ``async def send_proven(self, item: ClientItem) -> asyncio.Future[Any]``, ``send`` and
    # ``ping_behind`` in one, whose future is the pong's. The shell uses it when it has it.
