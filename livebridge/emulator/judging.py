"""Client frames and closes judged without I/O: what a frame says, or why the service refuses it,
and who ended a connection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from websockets.exceptions import ConnectionClosed

from livebridge.emulator.contract import Ending
from livebridge.emulator.shared import MAX_FRAME_BYTES
from livebridge.errors import WireError
from livebridge.vendors.gemini import wire


@dataclass(frozen=True, slots=True)
class Rejection:
    """A frame the service refuses with 1007: the violation kind and the close reason."""

    kind: str
    reason: str
    offending: dict[str, Any]


def read_frame(
    frame: str | bytes, max_bytes: int = MAX_FRAME_BYTES
) -> tuple[dict[str, Any], wire.ClientMessage | Rejection]:
    """What to put in the transcript for ``frame``, and the message it carries or its rejection.

    Frames over ``max_bytes`` are refused as the service refuses frames of about 1 MB
    (googleapis/mcp-toolbox #3637); a message must be JSON with exactly one
    known top-level field (§2).
    """
    size = len(frame) if isinstance(frame, bytes) else len(frame.encode())
    record: dict[str, Any]
    if size > max_bytes:
        record = {"oversized": size}
        reason = f"Request payload size exceeds the limit: {max_bytes} bytes."
        return record, Rejection("frame_too_large", reason, record)
    try:
        raw = wire.decode_client_json(frame)
    except WireError as error:
        text = frame if isinstance(frame, str) else frame.decode("utf-8", "replace")
        record = {"invalid": text[:1000]}
        return record, Rejection("malformed_message", error.reason, record)
    try:
        message = wire.convert_client(raw)
    except WireError as error:
        return raw, Rejection("malformed_message", error.reason, raw)
    if len(raw) != 1:
        names = ", ".join(wire.snake(name) for name in raw)
        reason = f"Invalid JSON payload received. Exactly one message field expected, got: {names}"
        return raw, Rejection("malformed_message", reason, raw)
    return raw, message


def ending_of(
    closed: ConnectionClosed, *, server_closed: bool
) -> tuple[Ending, dict[str, Any] | None]:
    """How the connection ended, and the client's close to record (None when the server closed).

    The server ended it when it closed first (its own close, or its stop, unless the client's
    close frame had already arrived). Otherwise the client closed normally, or crashed: 1011,
    or a drop with no close frame at all.
    """
    client_first = closed.rcvd is not None and closed.rcvd_then_sent is not False
    if not client_first and (server_closed or closed.sent is not None):
        return "server_close", None
    if closed.rcvd is None:
        return "client_crash", {"close": {"code": 1006, "reason": "dropped"}}
    close = {"close": {"code": closed.rcvd.code, "reason": closed.rcvd.reason}}
    return ("client_crash" if closed.rcvd.code == 1011 else "client_close"), close
