"""Reading session recordings (``livebridge.recording.record`` writes them), streamed and checked.

A recording is read line by line, never whole, and both the memory and the work are bounded:
a line longer than ``MAX_LINE_BYTES``, a file of more than ``max_bytes`` decompressed, more
than ``max_lines`` lines or more than ``MAX_BLANK_LINES`` blank ones, or a gzip file that
decompresses to more than ``MAX_RATIO`` times the compressed bytes read (judged from
``RATIO_FLOOR`` on) is a ``RecordingError`` naming the file and the bound: a gzip bomb stops
within a few MiB of its output. Each entry keeps its line's JSON as bytes and decodes it when
asked (``Entry.data``): the objects of a decoded line take ten times its bytes, so a large
recording is held at about its own size.

Every field replay reads is decoded into a typed shape as the line is read, so a hand-edited
recording fails with one line naming the line and the field (``RecordingError``), never later
inside the replay: call and answer ids are strings (or absent), names strings, arguments and
answers objects. ``t`` must be finite, at least 0, never more than ``T_TOLERANCE`` below the
line before and never more than ``MAX_RECORDED_GAP`` above it; a line nests at most
``MAX_DEPTH`` objects and arrays; ``dataBytes`` (a reduced audio blob's length) is at most
``MAX_AUDIO_BYTES``.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import math
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any, Literal, cast

import msgspec

from livebridge.errors import RecordingError
from livebridge.vendors import DESCRIPTORS

#: The wires a recording's header may name (``vendor``): every vendor whose descriptor has a
#: recording codec. A header without one is of ``DEFAULT_VENDOR``, the format's first.
VENDORS = tuple(vendor.name for vendor in DESCRIPTORS if vendor.recording is not None)
DEFAULT_VENDOR = VENDORS[0]
#: The version written in the header; readers read it and every older one, and refuse newer.
FORMAT_VERSION = 2
#: The longest line read (a line holds one frame; the service's are about 1 MB at most).
MAX_LINE_BYTES = 16 * 1024 * 1024
#: The default bound on a recording's decompressed size: four times the writer's default bound.
MAX_READ_BYTES = 1024 * 1024 * 1024
#: The default bound on a recording's lines, blank ones included: a 1 GiB recording of the
#: service's shortest entries (about 70 bytes) has fewer. Reading a line takes microseconds.
MAX_LINES = 16 * 1024 * 1024
#: The most blank lines a recording may hold (the writer writes none; a hand edit leaves a few).
MAX_BLANK_LINES = 1000
#: A gzip recording may decompress to at most this many times the compressed bytes read: the
#: writer's JSON compresses about 35:1 with reduced audio, real audio about 1.3:1; a gzip bomb
#: about 1000:1. A file refused by it reads once decompressed (``gunzip``).
MAX_RATIO = 100
#: The ratio is judged once this much is decompressed (small files and read-ahead aside).
RATIO_FLOOR = 4 * 1024 * 1024
#: The largest audio blob a reduced (``dataBytes``) entry may stand for.
MAX_AUDIO_BYTES = 16 * 1024 * 1024
#: The deepest nesting of objects and arrays in a line (a server message is about 8 deep).
MAX_DEPTH = 64
#: The longest gap (seconds) between two lines' ``t``: a Gemini Live connection lasts about
#: 10 minutes and ends with ``goAway``, so no session is silent for 15 minutes.
MAX_RECORDED_GAP = 15 * 60.0
#: How far (seconds) ``t`` may go back from one line to the next (the writer's clock is
#: monotonic and rounded to microseconds).
T_TOLERANCE = 0.001

#: ``keep``: audio bytes are written; ``length``: only each blob's length.
AudioMode = Literal["keep", "length"]

_EVENTS = frozenset({"open", "recv", "send", "malformed", "close", "truncated"})
_decode = msgspec.json.decode


@dataclass(frozen=True, slots=True)
class Entry:
    """One line of a recording after the header; ``data`` is decoded from ``raw`` each time."""

    line: int
    t: float
    conn: int
    ev: str
    raw: bytes = field(repr=False)  # the line's JSON (``t``, ``conn`` and ``ev`` included)

    @property
    def data(self) -> dict[str, Any]:
        """The entry's fields but ``t``, ``conn`` and ``ev`` (a fresh dict on each access)."""
        data: dict[str, Any] = _decode(self.raw)
        for key in ("t", "conn", "ev"):
            data.pop(key, None)
        return data


@dataclass(slots=True)
class Recording:
    """A whole recording, read and checked."""

    path: str
    audio: AudioMode
    entries: list[Entry] = field(default_factory=list)
    #: The wire recorded: ``"gemini"`` (Gemini Live) or ``"gpt-live"`` (the header's ``vendor``).
    vendor: str = DEFAULT_VENDOR
    #: The ``truncated`` entry when the recording hit its size bound (it is not in ``entries``).
    truncated: Entry | None = None

    def connections(self) -> list[list[Entry]]:
        """The entries of each connection, in order."""
        by_conn: dict[int, list[Entry]] = {}
        for entry in self.entries:
            by_conn.setdefault(entry.conn, []).append(entry)
        return [by_conn[conn] for conn in sorted(by_conn)]


# -- the checked shape of each entry (only what replay reads) -------------------------------


class _Call(msgspec.Struct):  # no id: a Vertex AI call, named by the replay
    name: str
    id: str | None = None
    args: dict[str, Any] | None = None


class _ToolCall(msgspec.Struct):
    functionCalls: list[_Call] | None = None


class _Cancellation(msgspec.Struct):
    ids: list[str] | None = None


class _Update(msgspec.Struct):
    resumable: bool | None = None
    newHandle: str | None = None


class _GoAway(msgspec.Struct):
    timeLeft: str | None = None


class _Received(msgspec.Struct):
    toolCall: _ToolCall | None = None
    toolCallCancellation: _Cancellation | None = None
    sessionResumptionUpdate: _Update | None = None
    goAway: _GoAway | None = None


class _Answer(msgspec.Struct):
    id: str | None = None
    name: str | None = None
    response: dict[str, Any] | None = None
    willContinue: bool | None = None


class _ToolResponse(msgspec.Struct):
    functionResponses: list[_Answer] | None = None


class _Sent(msgspec.Struct):
    toolResponse: _ToolResponse | None = None


class _Line(msgspec.Struct):
    t: float
    conn: int
    ev: str


class _Open(msgspec.Struct):
    handle: str | None = None
    session_id: str | None = None


class _Close(msgspec.Struct):
    by: Literal["server", "client"] = "client"
    code: int | None = None
    reason: str = ""


class _Truncated(msgspec.Struct):
    limit: int | None = None


class _Malformed(msgspec.Struct):
    error: str = ""


class _RecvLine(msgspec.Struct):
    msg: _Received


class _SendLine(msgspec.Struct):
    msg: _Sent


_SHAPES: dict[str, type[msgspec.Struct]] = {
    "open": _Open,
    "close": _Close,
    "truncated": _Truncated,
    "malformed": _Malformed,
    "recv": _RecvLine,
    "send": _SendLine,
}


# -- reading ---------------------------------------------------------------------------------


def read_recording(
    path: str | os.PathLike[str],
    *,
    max_bytes: int = MAX_READ_BYTES,
    max_lines: int = MAX_LINES,
) -> Recording:
    """Read and check a recording; ``RecordingError`` names the line of the first problem.

    ``max_bytes`` bounds the decompressed size read and ``max_lines`` the lines, blank ones
    included; a gzip file must also keep within ``MAX_RATIO`` (a gzip bomb stops early)."""
    name = os.fspath(path)
    try:
        with _open_bytes(name) as (file, compressed):
            return _read(name, _lines(name, file, compressed, max_bytes, max_lines))
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as exc:
        raise RecordingError(f"{name}: cannot read the recording: {exc}") from None


def _read(name: str, lines: Iterator[tuple[int, bytes]]) -> Recording:
    first = next(lines, None)
    if first is None:
        raise RecordingError(f"{name}: empty file, not a livebridge recording")
    if first[0] != 1:
        raise RecordingError(f"{name}:1: a blank line, not a livebridge recording's header")
    header = _json(name, 1, first[1])
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
    vendor = header.get("vendor", DEFAULT_VENDOR)
    if vendor not in VENDORS:
        raise RecordingError(
            f"{name}:1: unknown vendor {vendor!r} (this livebridge reads recordings of "
            f"{', '.join(VENDORS)})"
        )
    recording = Recording(name, audio, vendor=vendor)
    last = 0.0  # the previous entry's t
    for number, text in lines:
        if recording.truncated is not None:
            raise RecordingError(
                f"{name}:{number}: a line after the 'truncated' line "
                f"{recording.truncated.line}: the writer writes nothing after it"
            )
        entry = _entry(name, number, text)
        _check_time(name, number, last, entry.t)
        last = entry.t
        if entry.ev == "truncated":
            recording.truncated = entry
        else:
            recording.entries.append(entry)
    return recording


def _entry(name: str, number: int, text: bytes) -> Entry:
    """One line checked: the fields replay reads have their types; the entry holds the bytes."""
    value = _json(name, number, text)
    try:
        head: _Line | None = msgspec.convert(value, _Line)
    except msgspec.ValidationError:
        head = None
    if head is None or head.ev not in _EVENTS:
        raise RecordingError(
            f"{name}:{number}: not a recording entry (needs numeric 't', integer 'conn' "
            f"and 'ev' one of {', '.join(sorted(_EVENTS))})"
        )
    if not (math.isfinite(head.t) and head.t >= 0):
        raise RecordingError(f"{name}:{number}: 't' must be a finite number >= 0, not {head.t}")
    if head.conn < 1:
        raise RecordingError(f"{name}:{number}: 'conn' counts from 1, not {head.conn}")
    if text.count(b"{") + text.count(b"[") > MAX_DEPTH:  # else it cannot nest that deep
        _check_depth(name, number, value)
    shape = _SHAPES.get(head.ev)
    if shape is not None:
        if head.ev in ("recv", "send") and not isinstance(value.get("msg"), dict):
            raise RecordingError(f"{name}:{number}: a {head.ev} entry without a 'msg' object")
        try:
            msgspec.convert(value, shape)
        except msgspec.ValidationError as exc:
            raise RecordingError(f"{name}:{number}: {_field_error(exc)}") from None
    if b"dataBytes" in text:
        _check_audio(name, number, value)
    return Entry(number, head.t, head.conn, head.ev, text)


def _check_time(name: str, number: int, last: float, t: float) -> None:
    """``t`` follows the line before: not back in time, and not past the longest gap."""
    if t < last - T_TOLERANCE:
        raise RecordingError(
            f"{name}:{number}: 't' goes back in time ({t:g} after {last:g}): the lines are out "
            "of order"
        )
    if t - last > MAX_RECORDED_GAP:
        raise RecordingError(
            f"{name}:{number}: 't' jumps {t - last:g} s after the line before, over the "
            f"{MAX_RECORDED_GAP:g} s a session is ever silent"
        )


def _check_depth(name: str, number: int, value: Any) -> None:
    """No object or array nests deeper than MAX_DEPTH (replay walks them recursively)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise RecordingError(
                f"{name}:{number}: nested deeper than {MAX_DEPTH} objects and arrays: "
                "not a recording entry"
            )
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)


def _field_error(exc: msgspec.ValidationError) -> str:
    """msgspec's "Expected `str`, got `int` - at `$.msg...`" as "msg...: expected str, got int"."""
    message = str(exc)
    what, _, where = message.partition(" - at `$.")
    if not where:
        return message
    return f"{where.rstrip('`')}: {what[0].lower()}{what[1:]}".replace("`", "")


def _check_audio(name: str, number: int, value: Any) -> None:
    """Every ``dataBytes`` is a length a reader can restore: an int from 0 to MAX_AUDIO_BYTES."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            size = item.get("dataBytes")
            if "dataBytes" in item and not (isinstance(size, int) and 0 <= size <= MAX_AUDIO_BYTES):
                raise RecordingError(
                    f"{name}:{number}: 'dataBytes' must be an integer from 0 to "
                    f"{MAX_AUDIO_BYTES}, not {size!r}"
                )
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


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


def _lines(
    name: str, file: IO[bytes], compressed: IO[bytes] | None, max_bytes: int, max_lines: int
) -> Iterator[tuple[int, bytes]]:
    """The file's lines but blank ones, numbered from 1, each at most MAX_LINE_BYTES, all within
    max_bytes, max_lines and MAX_BLANK_LINES; from a gzip file (``compressed`` its raw bytes)
    within MAX_RATIO too."""
    total = 0
    number = 0
    blank = 0
    ratio_at = RATIO_FLOOR  # the ratio is judged at each MiB from the floor on
    while True:
        line = file.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        number += 1
        total += len(line)
        if len(line) > MAX_LINE_BYTES:
            raise RecordingError(
                f"{name}:{number}: a line longer than {MAX_LINE_BYTES} bytes: not a recording"
            )
        if number > max_lines:
            raise RecordingError(
                f"{name}:{number}: more than {max_lines} lines: larger than a recording is "
                "read (read_recording(max_lines=...))"
            )
        if total > max_bytes:
            raise RecordingError(
                f"{name}:{number}: more than {max_bytes} bytes (decompressed): larger than a "
                "recording is read (read_recording(max_bytes=...))"
            )
        if compressed is not None and total > ratio_at:
            ratio_at = total + 1024 * 1024
            read = compressed.tell()
            if total > MAX_RATIO * read:
                raise RecordingError(
                    f"{name}:{number}: {total} bytes decompressed from {read}, over the "
                    f"{MAX_RATIO}:1 a recording compresses to: a gzip bomb? (gunzip it to read it)"
                )
        if line.isspace():
            blank += 1
            if blank > MAX_BLANK_LINES:
                raise RecordingError(
                    f"{name}:{number}: more than {MAX_BLANK_LINES} blank lines: not a recording "
                    "(the writer writes none)"
                )
            continue
        yield number, line


def _json(name: str, number: int, text: bytes) -> dict[str, Any]:
    if not text.endswith(b"\n"):  # the writer ends every line: this one was cut short
        raise RecordingError(
            f"{name}:{number}: the file ends mid-line (was it truncated?): "
            "remove the incomplete last line to read the rest"
        )
    try:
        value = _decode(text)
    except msgspec.DecodeError as exc:
        raise RecordingError(f"{name}:{number}: not valid JSON: {exc}") from None
    except RecursionError:
        raise RecordingError(
            f"{name}:{number}: nested deeper than {MAX_DEPTH} objects and arrays: "
            "not a recording entry"
        ) from None
    if not isinstance(value, dict):
        raise RecordingError(f"{name}:{number}: expected a JSON object, got {type(value).__name__}")
    return value


@contextlib.contextmanager
def _open_bytes(name: str) -> Iterator[tuple[IO[bytes], IO[bytes] | None]]:
    """The file's (decompressed) bytes, and for a gzip file its raw bytes (to judge the ratio)."""
    with open(name, "rb") as raw:
        if not name.endswith(".gz"):
            yield raw, None
            return
        with gzip.GzipFile(fileobj=raw, mode="rb") as file:
            yield cast("IO[bytes]", file), raw
