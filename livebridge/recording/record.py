"""Session recordings: every frame of every connection, written as it passes, read back checked.

A recording is JSON Lines (gzip-compressed when the path ends in ``.gz``). The first line is the
header ``{"livebridge_recording": 2, "audio": "length" | "keep"}``, with ``"vendor":
"gpt-live"`` for a GPT-Live session (absent: Gemini Live); every other line is one
entry with ``t`` (monotonic seconds since the recording began), ``conn`` (connection number
from 1) and ``ev``:

- ``open``: a connection opened; ``handle`` (the resumption handle it resumed, or null) and
  ``session_id``.
- ``recv``: a server message, ``msg``, as the session decoded it (camelCase on Gemini).
- ``send``: a client message, ``msg``, as it was written (camelCase on Gemini; one line per
  frame).
- ``malformed``: a server frame that did not decode; ``error``.
- ``close``: the connection ended; ``by`` (``"server"`` or ``"client"``), ``code``, ``reason``.
- ``truncated``: the last line when the recording reached its size bound (``limit``, in bytes
  of JSON before compression); nothing of the session after it was written. New in format 2;
  format 1 files (without it) are read as they are. Reading (``livebridge.recording.read``) is
  streamed and bounded, and checks each field's type.

Audio is kept only when asked: by default each ``inlineData`` / ``audio`` blob's ``data`` is
replaced by ``dataBytes`` (its decoded length), and a reader turns it back into that many zero
bytes. Tool call arguments and tool answers (an answer's ``output`` or ``error`` object) pass
through ``redact(function, value)`` (the trace hook) before they are written, and every line
passes the API-key filter of ``connectors.secrets``. Lines are written as the frames pass, so
the file grows with the conversation and a crash loses at most the line being written.
What a line holds of a vendor's wire is its ``WireCodec``'s (``GeminiWire`` here; GPT-Live's
in ``vendors.openai_live.recording``), chosen by the protocol's ``wire_name``.

A recording that cannot begin (no such directory, no permission, the disk already full) is a
``RecordingError`` naming the path and the reason, raised by ``connect``. A write that fails
later (the disk filled up) ends the recording there: ``on_failed`` is called once (observers
hear ``RecordingFailed``) and the session goes on unrecorded; the file keeps what was written.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any, Literal, Protocol, cast

from livebridge.calls.observers import Observer, RecordingFailed, RecordingTruncated, emit
from livebridge.calls.tools import ToolRegistry
from livebridge.errors import MalformedMessageError, RecordingError, TransportClosed
from livebridge.observe.trace import TraceObserver
from livebridge.protocol import secrets
from livebridge.protocol.actions import ProtocolOptions
from livebridge.protocol.base import Connector, LiveProtocol, Redact, WireCodec
from livebridge.protocol.transport import ClientItem, Transport
from livebridge.recording.read import (
    DEFAULT_VENDOR,
    FORMAT_VERSION,
    AudioMode,
)

log = logging.getLogger("livebridge.recording.record")

#: The default size bound of a recording (``SessionOptions.record_max_bytes``): 256 MiB of JSON.
DEFAULT_MAX_BYTES = 256 * 1024 * 1024


class RecordOptions(Protocol):
    """What a recording needs of ``SessionOptions`` (its ``record*`` fields)."""

    @property
    def record(self) -> str | None: ...
    @property
    def record_audio(self) -> AudioMode: ...
    @property
    def record_max_bytes(self) -> int: ...


# -- writing ------------------------------------------------------------------------------------


class RecordingWriter:
    """Writes the lines of one recording; ``close()`` flushes and closes the file.

    At most ``max_bytes`` of JSON are written (before compression): the line that would cross
    the bound is replaced by a ``truncated`` line, ``on_truncated`` is called once, and every
    later line is dropped, so a long session cannot fill the disk and the file still reads.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        audio: AudioMode = "length",
        redact: Redact | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        on_truncated: Callable[[], None] | None = None,
        on_failed: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        codec: WireCodec,
    ) -> None:
        """Opens ``path`` and writes the header; ``RecordingError`` if either fails.
        ``on_failed(reason)`` is called once if a later write fails. ``codec``: the vendor's
        wire, from its protocol (``LiveProtocol.recording_codec``)."""
        self.codec = codec
        self.path = os.fspath(path)
        self.max_bytes = max_bytes
        #: Bytes of JSON written so far (the file's size when it is not compressed).
        self.written = 0
        self.truncated = False
        #: Why writing failed (the recording stopped there), or None.
        self.failed: str | None = None
        self._on_failed = on_failed
        self._audio = audio
        self._redact = redact
        self._on_truncated = on_truncated
        self._clock = clock
        self._start = clock()
        self._conn = 0
        try:
            self._file: IO[str] = _open_text(self.path, "w")
        except OSError as exc:
            raise RecordingError(f"cannot record to {self.path}: {_why(exc)}") from None
        header: dict[str, Any] = {"livebridge_recording": FORMAT_VERSION, "audio": audio}
        if self.codec.name != DEFAULT_VENDOR:
            header["vendor"] = self.codec.name
        self._write(header)
        if self.failed is not None:
            raise RecordingError(f"cannot record to {self.path}: {self.failed}")

    def open(self, handle: str | None, session_id: str | None) -> int:
        """A new connection began; its number."""
        self._conn += 1
        self._entry("open", handle=handle, session_id=session_id)
        return self._conn

    def received(self, message: Any) -> None:
        self._entry("recv", msg=self._scrub(self.codec.server(message)))

    def sent(self, item: ClientItem) -> None:
        for message in self.codec.client(item):
            self._entry("send", msg=self._scrub(message))

    def malformed(self, error: str) -> None:
        self._entry("malformed", error=error)

    def closed(self, by: Literal["server", "client"], code: int | None, reason: str) -> None:
        self._entry("close", by=by, code=code, reason=reason)

    def close(self) -> None:
        try:
            self._file.close()  # a compressed file writes its end now
        except OSError as exc:
            self._fail(exc)

    def _entry(self, ev: str, **data: Any) -> None:
        if self.truncated:
            return
        t = round(self._clock() - self._start, 6)
        line = self._line({"t": t, "conn": self._conn, "ev": ev, **data})
        # Room is always kept for the ``truncated`` line, so the file never ends without it.
        end = self._line({"t": t, "conn": self._conn, "ev": "truncated", "limit": self.max_bytes})
        if self.written + len(line.encode()) + len(end.encode()) > self.max_bytes:
            self.truncated = True
            self._put(end)
            log.warning(
                "the recording %s reached %d bytes (record_max_bytes): it stops here, the "
                "session goes on",
                self.path,
                self.max_bytes,
            )
            if self._on_truncated is not None:
                self._on_truncated()
            return
        self._put(line)

    def _write(self, line: dict[str, Any]) -> None:
        self._put(self._line(line))

    @staticmethod
    def _line(line: dict[str, Any]) -> str:
        text = json.dumps(line, ensure_ascii=False, separators=(",", ":"), default=repr)
        return secrets.redact(text) + "\n"

    def _put(self, text: str) -> None:
        if self._file.closed:
            return
        try:
            self._file.write(text)
            self._file.flush()
        except OSError as exc:
            self._fail(exc)
            return
        self.written += len(text.encode())

    def _fail(self, exc: OSError) -> None:
        """A write failed: the recording ends here (once), the session goes on."""
        if self.failed is not None:
            return
        self.failed = _why(exc)
        with contextlib.suppress(OSError):  # what could not be flushed is lost either way
            self._file.close()
        if self._conn == 0:
            return  # the header: ``__init__`` raises
        log.warning(
            "the recording %s failed (%s): it stops here, the session goes on",
            self.path,
            self.failed,
        )
        if self._on_failed is not None:
            self._on_failed(self.failed)

    def _scrub(self, message: dict[str, Any]) -> dict[str, Any]:
        self.codec.scrub(message, keep_audio=self._audio == "keep", redact=self._redact)
        return message


class RecordingConnector:
    """Wraps a connector so that every connection it opens is written to ``writer``."""

    def __init__(self, inner: Connector, writer: RecordingWriter) -> None:
        self._inner = inner
        self.writer = writer

    @classmethod
    def to_file(
        cls,
        inner: Connector,
        options: RecordOptions,
        codec: WireCodec,
        observers: Sequence[Observer] = (),
    ) -> RecordingConnector:
        """``inner`` recorded as ``options`` say, redacting with the first ``TraceObserver``'s
        hook; the observers hear ``RecordingTruncated`` if the recording reaches its bound.
        ``codec``: the vendor's wire, from its protocol."""
        if options.record is None:
            raise ValueError("RecordingConnector.to_file needs options.record, a path")
        redact = next((o.redact for o in observers if isinstance(o, TraceObserver)), None)
        path, limit = options.record, options.record_max_bytes

        def truncated() -> None:
            emit(observers, RecordingTruncated(path, limit))

        def failed(reason: str) -> None:
            emit(observers, RecordingFailed(path, reason))

        writer = RecordingWriter(
            path,
            audio=options.record_audio,
            redact=redact,
            max_bytes=limit,
            on_truncated=truncated,
            on_failed=failed,
            codec=codec,
        )
        return cls(inner, writer)

    def protocol(
        self, tools: ToolRegistry, options: ProtocolOptions, *, observed: bool
    ) -> LiveProtocol:
        return self._inner.protocol(tools, options, observed=observed)

    @asynccontextmanager
    async def open(self, handle: str | None) -> AsyncIterator[Transport]:
        writer = self.writer
        ended: list[bool] = []
        opened = False  # a connection that failed to open is not part of the recording
        try:
            async with self._inner.open(handle) as transport:
                opened = True
                writer.open(handle, transport.session_id)
                yield _RecordingTransport(transport, writer, ended)
        except TransportClosed as exc:
            if opened and not ended:
                ended.append(True)
                writer.closed("server", exc.code, exc.reason)
            raise
        finally:
            if opened and not ended:
                writer.closed("client", 1000, "")


class _RecordingTransport:
    def __init__(self, inner: Transport, writer: RecordingWriter, ended: list[bool]) -> None:
        self.session_id = inner.session_id
        self._inner = inner
        self._writer = writer
        self._ended = ended

    async def recv(self) -> Any:
        try:
            message = await self._inner.recv()
        except MalformedMessageError as exc:
            self._writer.malformed(str(exc))
            raise
        except TransportClosed as exc:
            self._end(exc)
            raise
        self._writer.received(message)
        return message

    async def send(self, item: ClientItem) -> None:
        try:
            await self._inner.send(item)
        except TransportClosed as exc:
            self._end(exc)
            raise
        self._writer.sent(item)

    async def close(self) -> None:
        if not self._ended:
            self._ended.append(True)
            self._writer.closed("client", 1000, "")
        await self._inner.close()

    def _end(self, exc: TransportClosed) -> None:
        if not self._ended:
            self._ended.append(True)
            self._writer.closed("server", exc.code, exc.reason)


def _why(exc: OSError) -> str:
    """An OS error in words, without the path the message already names."""
    return exc.strerror or str(exc) or type(exc).__name__


def _open_text(name: str, mode: Literal["w"]) -> IO[str]:
    if name.endswith(".gz"):
        return cast("IO[str]", gzip.open(Path(name), mode + "t", encoding="utf-8"))
    return open(name, mode, encoding="utf-8")
