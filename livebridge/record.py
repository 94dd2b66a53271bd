"""Session recordings: every frame of every connection, written as it passes, read back checked.

A recording is JSON Lines (gzip-compressed when the path ends in ``.gz``). The first line is the
header ``{"livebridge_recording": 2, "audio": "length" | "keep"}``; every other line is one
entry with ``t`` (monotonic seconds since the recording began), ``conn`` (connection number
from 1) and ``ev``:

- ``open``: a connection opened; ``handle`` (the resumption handle it resumed, or null) and
  ``session_id``.
- ``recv``: a server message, ``msg``, as the session decoded it (camelCase).
- ``send``: a client message, ``msg``, as it was written (camelCase).
- ``malformed``: a server frame that did not decode; ``error``.
- ``close``: the connection ended; ``by`` (``"server"`` or ``"client"``), ``code``, ``reason``.
- ``truncated``: the last line when the recording reached its size bound (``limit``, in bytes
  of JSON before compression); nothing of the session after it was written. New in format 2;
  format 1 files (without it) are read as they are.

Audio is kept only when asked: by default each ``inlineData`` / ``audio`` blob's ``data`` is
replaced by ``dataBytes`` (its decoded length), and a reader turns it back into that many zero
bytes. Tool call arguments and tool answers (an answer's ``output`` or ``error`` object) pass
through ``redact(function, value)`` (the trace hook) before they are written, and every line
passes the API-key filter of ``connectors.secrets``. Lines are written as the frames pass, so
the file grows with the conversation and a crash loses at most the line being written.

A recording that cannot begin (no such directory, no permission, the disk already full) is a
``RecordingError`` naming the path and the reason, raised by ``connect``. A write that fails
later (the disk filled up) ends the recording there: ``on_failed`` is called once (observers
hear ``RecordingFailed``) and the session goes on unrecorded; the file keeps what was written.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, Protocol, cast

from livebridge import wire
from livebridge.connectors import Connector, secrets
from livebridge.errors import MalformedMessageError, RecordingError, TransportClosed
from livebridge.observe import Observer, RecordingFailed, RecordingTruncated, emit
from livebridge.protocol.base import LiveProtocol, ProtocolOptions
from livebridge.tools import ToolRegistry
from livebridge.trace import Redact, TraceObserver
from livebridge.transport import ClientItem, Transport, encode_client

__all__ = [
    "DEFAULT_MAX_BYTES",
    "FORMAT_VERSION",
    "AudioMode",
    "Entry",
    "RecordOptions",
    "Recording",
    "RecordingConnector",
    "RecordingWriter",
    "read_recording",
    "restore_audio",
]

log = logging.getLogger("livebridge.record")

#: The version written in the header; readers read it and every older one, and refuse newer.
FORMAT_VERSION = 2
#: The default size bound of a recording (``SessionOptions.record_max_bytes``): 256 MiB of JSON.
DEFAULT_MAX_BYTES = 256 * 1024 * 1024

#: ``keep``: audio bytes are written; ``length``: only each blob's length.
AudioMode = Literal["keep", "length"]


class RecordOptions(Protocol):
    """What a recording needs of ``SessionOptions`` (its ``record*`` fields)."""

    @property
    def record(self) -> str | None: ...
    @property
    def record_audio(self) -> AudioMode: ...
    @property
    def record_max_bytes(self) -> int: ...


_EVENTS = frozenset({"open", "recv", "send", "malformed", "close", "truncated"})


@dataclass(frozen=True, slots=True)
class Entry:
    """One line of a recording after the header."""

    line: int
    t: float
    conn: int
    ev: str
    data: dict[str, Any]


@dataclass(slots=True)
class Recording:
    """A whole recording, read and checked."""

    path: str
    audio: AudioMode
    entries: list[Entry] = field(default_factory=list)
    #: The ``truncated`` entry when the recording hit its size bound (it is not in ``entries``).
    truncated: Entry | None = None

    def connections(self) -> list[list[Entry]]:
        """The entries of each connection, in order."""
        by_conn: dict[int, list[Entry]] = {}
        for entry in self.entries:
            by_conn.setdefault(entry.conn, []).append(entry)
        return [by_conn[conn] for conn in sorted(by_conn)]


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
    ) -> None:
        """Opens ``path`` and writes the header; ``RecordingError`` if either fails.
        ``on_failed(reason)`` is called once if a later write fails."""
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
        self._write({"livebridge_recording": FORMAT_VERSION, "audio": audio})
        if self.failed is not None:
            raise RecordingError(f"cannot record to {self.path}: {self.failed}")

    def open(self, handle: str | None, session_id: str | None) -> int:
        """A new connection began; its number."""
        self._conn += 1
        self._entry("open", handle=handle, session_id=session_id)
        return self._conn

    def received(self, message: wire.ServerMessage) -> None:
        self._entry("recv", msg=self._scrub(wire.to_builtins(message)))

    def sent(self, item: ClientItem) -> None:
        self._entry("send", msg=self._scrub(json.loads(encode_client(item))))

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
        if self._audio == "length":
            _reduce_audio(message)
        if self._redact is not None:
            _redact_calls(message, self._redact)
        return message


def _reduce_audio(value: Any) -> None:
    """Replace each audio blob's base64 ``data`` by ``dataBytes`` (its length), in place."""
    if isinstance(value, dict):
        for key in ("inlineData", "audio"):
            blob = value.get(key)
            if isinstance(blob, dict) and isinstance(blob.get("data"), str):
                blob["dataBytes"] = len(wire.b64decode(blob.pop("data")))
        for item in value.values():
            _reduce_audio(item)
    elif isinstance(value, list):
        for item in value:
            _reduce_audio(item)


def _redact_calls(message: dict[str, Any], redact: Redact) -> None:
    """Pass tool call arguments and tool results through ``redact``, in place."""
    calls = list((message.get("toolCall") or {}).get("functionCalls") or [])
    for part in ((message.get("serverContent") or {}).get("modelTurn") or {}).get("parts") or []:
        if isinstance(part, dict) and isinstance(part.get("functionCall"), dict):
            calls.append(part["functionCall"])
    for call in calls:
        if isinstance(call, dict) and isinstance(call.get("args"), dict):
            call["args"] = _redacted(redact, str(call.get("name")), call["args"])
    responses = (message.get("toolResponse") or {}).get("functionResponses") or []
    for response in responses:
        body = response.get("response") if isinstance(response, dict) else None
        for key in ("output", "error"):  # an error's message can quote the arguments
            if isinstance(body, dict) and isinstance(body.get(key), dict):
                body[key] = _redacted(redact, str(response.get("name")), body[key])


def _redacted(redact: Redact, function: str, value: dict[str, Any]) -> dict[str, Any]:
    try:
        return redact(function, value)
    except Exception:  # a failing hook hides the value rather than leaking it
        return {"redaction_failed": True}


class RecordingConnector:
    """Wraps a connector so that every connection it opens is written to ``writer``."""

    def __init__(self, inner: Connector, writer: RecordingWriter) -> None:
        self._inner = inner
        self.writer = writer

    @classmethod
    def to_file(
        cls, inner: Connector, options: RecordOptions, observers: Sequence[Observer] = ()
    ) -> RecordingConnector:
        """``inner`` recorded as ``options`` say, redacting with the first ``TraceObserver``'s
        hook; the observers hear ``RecordingTruncated`` if the recording reaches its bound."""
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

    async def recv(self) -> wire.ServerMessage:
        try:
            message: wire.ServerMessage = await self._inner.recv()
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


# -- reading ------------------------------------------------------------------------------------


def read_recording(path: str | os.PathLike[str]) -> Recording:
    """Read and check a recording; ``RecordingError`` names the line of the first problem."""
    name = os.fspath(path)
    try:
        lines = list(_lines(name))
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise RecordingError(f"{name}: cannot read the recording: {exc}") from None
    if not lines:
        raise RecordingError(f"{name}: empty file, not a livebridge recording")
    header = _json(name, 1, lines[0])
    version = header.get("livebridge_recording")
    if not isinstance(version, int):
        raise RecordingError(
            f"{name}:1: not a livebridge recording (the first line has no 'livebridge_recording')"
        )
    if version > FORMAT_VERSION:
        raise RecordingError(
            f"{name}:1: recording format {version} is newer than this livebridge reads "
            f"({FORMAT_VERSION}): upgrade livebridge"
        )
    audio = header.get("audio", "length")
    if audio not in ("keep", "length"):
        raise RecordingError(f"{name}:1: unknown audio mode {audio!r} (expected keep or length)")
    recording = Recording(name, audio)
    for number, text in enumerate(lines[1:], start=2):
        if not text.strip():
            continue
        if recording.truncated is not None:
            raise RecordingError(
                f"{name}:{number}: a line after the 'truncated' line "
                f"{recording.truncated.line}: the writer writes nothing after it"
            )
        line = _json(name, number, text)
        t, conn, ev = line.pop("t", None), line.pop("conn", None), line.pop("ev", None)
        if not isinstance(t, int | float) or not isinstance(conn, int) or ev not in _EVENTS:
            raise RecordingError(
                f"{name}:{number}: not a recording entry (needs numeric 't', integer 'conn' "
                f"and 'ev' one of {', '.join(sorted(_EVENTS))})"
            )
        if ev in ("recv", "send") and not isinstance(line.get("msg"), dict):
            raise RecordingError(f"{name}:{number}: a {ev} entry without a 'msg' object")
        entry = Entry(number, float(t), conn, str(ev), line)
        if ev == "truncated":
            recording.truncated = entry
        else:
            recording.entries.append(entry)
    return recording


def restore_audio(message: Any) -> Any:
    """``message`` with each ``dataBytes`` blob turned back into that many zero bytes."""
    if isinstance(message, dict):
        out = {key: restore_audio(value) for key, value in message.items()}
        size = out.pop("dataBytes", None)
        if isinstance(size, int):
            out["data"] = base64.b64encode(bytes(size)).decode()
        return out
    if isinstance(message, list):
        return [restore_audio(item) for item in message]
    return message


def _lines(name: str) -> Iterator[str]:
    with _open_text(name, "r") as file:
        yield from file


def _json(name: str, number: int, text: str) -> dict[str, Any]:
    if not text.endswith("\n"):  # the writer ends every line: this one was cut short
        raise RecordingError(
            f"{name}:{number}: the file ends mid-line (was it truncated?): "
            "remove the incomplete last line to read the rest"
        )
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordingError(f"{name}:{number}: not valid JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise RecordingError(f"{name}:{number}: expected a JSON object, got {type(value).__name__}")
    return value


def _why(exc: OSError) -> str:
    """An OS error in words, without the path the message already names."""
    return exc.strerror or str(exc) or type(exc).__name__


def _open_text(name: str, mode: Literal["r", "w"]) -> IO[str]:
    if name.endswith(".gz"):
        return cast("IO[str]", gzip.open(Path(name), mode + "t", encoding="utf-8"))
    return open(name, mode, encoding="utf-8")
