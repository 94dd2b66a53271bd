"""``SessionOptions``: how a ``LiveSession`` behaves, whatever the vendor."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from livebridge.profiles import ModelProfile
from livebridge.protocol import resume
from livebridge.protocol.actions import ProtocolOptions
from livebridge.protocol.outbox import AudioPolicy
from livebridge.protocol.transport import CONNECT_SECONDS, TLS_READ_BUFFER, TransportKind

#: The protocol's share of the options, whose defaults are written there, once.
_PROTOCOL: Final = ProtocolOptions()


@dataclass(frozen=True, slots=True)
class SessionOptions:
    """How a ``LiveSession`` behaves; every default is the safe one.

    ``audio_during_blocking`` decides what happens to microphone audio sent while a BLOCKING call
    waits for its answer. ``"hold"`` (default) keeps up to ``held_audio_seconds`` of it and sends
    it right after the answer: nothing is lost and the service is never sent audio during a
    pending blocking call (reported to abort the session with 1008). ``"send"`` streams it
    anyway (barge-in keeps working), ``"drop"`` discards it.

    ``event_capacity`` bounds the events waiting for an app that reads ``events()`` slowly
    (the oldest media goes first), ``settled_capacity`` the ``ToolCallSettled`` among them (the
    oldest goes beyond it); the app is told of each discard by an ``EventsDropped`` that counts
    them, fates by their ``ending``. Observers and metrics see every fate whatever the app reads.

    ``outbox_bytes`` bounds the input waiting for the socket: past it ``send_*`` waits until the
    writer catches up. ``tls_read_buffer`` replaces asyncio's 256 KiB per-connection TLS read
    buffer (0 keeps it). ``record`` writes every frame of every connection to that path
    (``livebridge.recording.record``; ``.gz`` compresses), audio reduced to its length unless
    ``record_audio="keep"``, tool arguments and results through the ``TraceObserver``'s ``redact``.
    ``record_max_bytes`` bounds the recording: at the bound it ends with a ``truncated`` line.
    A recording that cannot begin (the disk full, no such directory) makes ``connect`` raise
    ``RecordingError``; one whose writing fails later stops there (observers hear
    ``RecordingFailed``) and the session goes on unrecorded.

    ``delegate`` (GPT-Live client delegation) is called once per delegation, in arrival order,
    with a ``Delegation``; it returns the reply's text, or an async iterator of text.
    ``attach`` (GPT-Live) names a running session (``"live_…"``, e.g. a SIP or WebRTC call's):
    the session attaches to it through its sideband instead of starting one, sends no
    ``session.start`` and no audio, and runs the calls of its Responses delegation once each.
    ``profile`` replaces the model profile chosen from the model name and the client's backend
    (``livebridge.profiles``): for a model the table does not know, or one that behaves
    differently from what the table says.

    ``connect_timeout`` bounds the opening of each connection, the first and every resumption:
    the websocket handshake and the service's answer to the session setup (Gemini
    ``setupComplete``, OpenAI ``session.updated``). A service that accepts the socket and never
    answers is a ``ConnectTimeoutError`` naming the host: ``connect`` raises it for the first
    connection; a resumption that times out is retried like a drop.
    """

    transport: TransportKind = "wire"
    audio_during_blocking: AudioPolicy = _PROTOCOL.audio_during_blocking
    held_audio_seconds: float = _PROTOCOL.held_audio_seconds
    outbox_bytes: int = _PROTOCOL.outbox_bytes
    event_capacity: int = 1024
    settled_capacity: int = 4096
    shutdown_grace: float = 5.0
    reconnect_attempts: int = _PROTOCOL.reconnect_attempts
    go_away_margin: float = _PROTOCOL.go_away_margin
    keepalive: dict[str, float] = field(default_factory=resume.keepalive_settings)
    tls_read_buffer: int = TLS_READ_BUFFER
    connect_timeout: float = CONNECT_SECONDS
    record: str | None = None
    record_audio: Literal["keep", "length"] = "length"
    record_max_bytes: int = 256 * 1024 * 1024
    profile: ModelProfile | None = None
    delegate: Callable[[Any], Any] | None = None
    attach: str | None = None

    def protocol_options(self) -> ProtocolOptions:
        """The protocol's share (its ``max_frame_bytes`` is the session's ``CallPolicy``'s)."""
        return ProtocolOptions(
            audio_during_blocking=self.audio_during_blocking,
            held_audio_seconds=self.held_audio_seconds,
            outbox_bytes=self.outbox_bytes,
            reconnect_attempts=self.reconnect_attempts,
            go_away_margin=self.go_away_margin,
        )
