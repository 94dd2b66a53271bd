"""One HTTP/1.1 request with a body, read without I/O: Twilio's voice webhook posts a form.

The WebSocket server reads only bodiless requests (a WebSocket upgrade, a GET), so the phone
server hands it every request but a ``POST``, and reads a ``POST`` with this: the request
line, the headers and a ``Content-Length`` body, each bounded. A request that cannot be read is
a ``BadRequest``: the status to answer with, and why.
"""

from __future__ import annotations

from dataclasses import dataclass

from websockets.datastructures import Headers

__all__ = ["MAX_BODY", "MAX_HEAD", "BadRequest", "PostedRequest", "RequestReader"]

#: Bytes of request line and headers, and of body, a request may have (a voice webhook's form
#: is a few hundred bytes to a few kilobytes).
MAX_HEAD = 16 * 1024
MAX_BODY = 64 * 1024


@dataclass(frozen=True, slots=True)
class BadRequest:
    """A request that cannot be read, and the HTTP status that says why."""

    status: int
    reason: str


@dataclass(frozen=True, slots=True)
class PostedRequest:
    method: str
    target: str  # the path and the query, as sent
    headers: Headers
    body: bytes


@dataclass(frozen=True, slots=True)
class _Head:
    method: str
    target: str
    headers: Headers
    length: int


class RequestReader:
    """Bytes in (``feed``), one ``PostedRequest`` (or ``BadRequest``) out once it can be."""

    def __init__(self, max_head: int = MAX_HEAD, max_body: int = MAX_BODY) -> None:
        self.max_head = max_head
        self.max_body = max_body
        self._buffer = bytearray()
        self._head: _Head | None = None

    def feed(self, data: bytes) -> PostedRequest | BadRequest | None:
        """The request once whole, ``BadRequest`` for one that cannot be, else None."""
        self._buffer += data
        if self._head is None:
            end = self._buffer.find(b"\r\n\r\n")
            if end > self.max_head or (end < 0 and len(self._buffer) > self.max_head):
                return BadRequest(431, "request header fields too large")
            if end < 0:
                return None
            head = self._parse_head(bytes(self._buffer[:end]))
            if isinstance(head, BadRequest):
                return head
            self._head = head
            del self._buffer[: end + 4]
        head = self._head
        if len(self._buffer) < head.length:
            return None
        return PostedRequest(
            head.method, head.target, head.headers, bytes(self._buffer[: head.length])
        )

    def _parse_head(self, head: bytes) -> _Head | BadRequest:
        request_line, *lines = head.decode("latin-1").split("\r\n")
        parts = request_line.split(" ")
        if len(parts) != 3 or parts[2] not in ("HTTP/1.1", "HTTP/1.0"):
            return BadRequest(400, "malformed request line")
        method, target, _ = parts
        if not target.startswith("/"):
            return BadRequest(400, "malformed request line")
        headers = Headers()
        for line in lines:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                return BadRequest(400, "malformed header line")
            headers[name] = value.strip()
        if "Transfer-Encoding" in headers:
            return BadRequest(411, "send the body with a Content-Length")
        lengths = set(headers.get_all("Content-Length"))
        if len(lengths) != 1:
            return BadRequest(411, "send the body with one Content-Length")
        (length,) = lengths
        if not (length.isascii() and length.isdigit()):
            return BadRequest(400, "malformed Content-Length")
        if len(length) > 9 or int(length) > self.max_body:
            return BadRequest(413, "request body too large")
        return _Head(method, target, headers, int(length))
