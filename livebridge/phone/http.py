"""One HTTP/1.1 request with a body, read without I/O: Twilio's voice webhook posts a form.

The WebSocket server reads only bodiless requests (a WebSocket upgrade, a GET), so the phone
server hands it every request but a ``POST``, and reads a ``POST`` with this: the request
line, the headers and a ``Content-Length`` body, each bounded. A request that cannot be read is
an ``HttpError`` carrying the status to answer with.
"""

from __future__ import annotations

from dataclasses import dataclass

from websockets.datastructures import Headers

__all__ = ["MAX_BODY", "MAX_HEAD", "HttpError", "PostedRequest", "RequestReader"]

#: Bytes of request line and headers, and of body, a request may have (a voice webhook's form
#: is a few hundred bytes to a few kilobytes).
MAX_HEAD = 16 * 1024
MAX_BODY = 64 * 1024


class HttpError(Exception):
    """A request that cannot be read, and the HTTP status that says why."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True, slots=True)
class PostedRequest:
    method: str
    target: str  # the path and the query, as sent
    headers: Headers
    body: bytes


class RequestReader:
    """Bytes in (``feed``), one ``PostedRequest`` out once it has all arrived."""

    def __init__(self, max_head: int = MAX_HEAD, max_body: int = MAX_BODY) -> None:
        self.max_head = max_head
        self.max_body = max_body
        self._buffer = bytearray()
        self._head: tuple[str, str, Headers] | None = None
        self._length = 0

    def feed(self, data: bytes) -> PostedRequest | None:
        """The request once whole, else None; raises ``HttpError`` for one that cannot be."""
        self._buffer += data
        if self._head is None:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buffer) > self.max_head:
                    raise HttpError(431, "request header fields too large")
                return None
            if end > self.max_head:
                raise HttpError(431, "request header fields too large")
            self._head = self._parse_head(bytes(self._buffer[:end]))
            del self._buffer[: end + 4]
        if len(self._buffer) < self._length:
            return None
        method, target, headers = self._head
        return PostedRequest(method, target, headers, bytes(self._buffer[: self._length]))

    def _parse_head(self, head: bytes) -> tuple[str, str, Headers]:
        try:
            text = head.decode("latin-1")
            request_line, *lines = text.split("\r\n")
            method, target, version = request_line.split(" ")
        except ValueError:
            raise HttpError(400, "malformed request line") from None
        if version not in ("HTTP/1.1", "HTTP/1.0") or not target.startswith("/"):
            raise HttpError(400, "malformed request line")
        headers = Headers()
        for line in lines:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                raise HttpError(400, "malformed header line")
            headers[name] = value.strip()
        if "Transfer-Encoding" in headers:
            raise HttpError(411, "send the body with a Content-Length")
        lengths = set(headers.get_all("Content-Length"))
        if len(lengths) != 1:
            raise HttpError(411, "send the body with one Content-Length")
        (length,) = lengths
        if not (length.isascii() and length.isdigit()):
            raise HttpError(400, "malformed Content-Length")
        if len(length) > 9 or int(length) > self.max_body:
            raise HttpError(413, "request body too large")
        self._length = int(length)
        return method, target, headers
