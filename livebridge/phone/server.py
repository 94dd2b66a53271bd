"""The phone bridge's server: Media Streams at ``/twilio``, the voice webhook at ``/twiml``.

Twilio's voice webhook (a form ``POST``, or a ``GET``) fetches ``/twiml`` and gets
``<Connect><Stream>`` to this server's ``/twilio``, then ``<Hangup/>``, which runs once the
bridge closes the stream. The public address is ``public_url`` when given (the tunnel or load
balancer Twilio reaches, ``https://``), else ``https://`` and the request's ``Host``.

With an ``auth_token`` every ``/twiml`` request and every ``/twilio`` upgrade must carry
Twilio's signature of the public URL it was made to (``signature``), else it is answered 403
and no Live session opens. With ``max_calls``, a call past the cap is answered with
``<Reject reason="busy"/>`` (a stream past it, 503): the calls counted are those streaming and
those answered with ``<Connect>`` in the last ``CallSlots.hold`` seconds whose stream has not
arrived yet.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, urlsplit
from xml.sax.saxutils import quoteattr

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from livebridge.errors import UsageError
from livebridge.phone.agent import FROM_PARAMETER, TO_PARAMETER
from livebridge.phone.bridge import PhoneBridge
from livebridge.phone.http import BadRequest, PostedRequest, RequestReader
from livebridge.phone.signature import HEADER, is_signed

__all__ = [
    "STREAM_PATH",
    "TWIML_PATH",
    "CallSlots",
    "busy_twiml",
    "call_parameters",
    "public_base",
    "serve_phone",
    "stream_url",
    "twiml",
]

log = logging.getLogger("livebridge.phone")

STREAM_PATH = "/twilio"
TWIML_PATH = "/twiml"
#: Seconds between two warnings about refused requests: a flood is counted, not logged each.
LOG_INTERVAL = 10.0


def public_base(url: str) -> str:
    """``url`` as the base of the public addresses: ``https://host[:port][/path]``, no
    trailing slash. Raises ``UsageError`` for anything else (Twilio streams only to
    ``wss://``, so the server it reaches is behind TLS)."""
    parts = urlsplit(url.strip())
    try:
        parts.port  # noqa: B018 (a bad port raises)
    except ValueError:
        parts = parts._replace(netloc="")
    if parts.scheme != "https" or not parts.hostname or parts.query or parts.fragment:
        raise UsageError(
            f"the public URL must be https://HOST[:PORT][/PATH] (Twilio streams to wss:// "
            f"only), not {url!r}"
        )
    return f"https://{parts.netloc}{parts.path.rstrip('/')}"


def stream_url(public_url: str | None, host: str | None) -> str:
    """The ``wss://`` address Twilio streams to: ``public_url``'s, else the ``Host``'s."""
    return "wss://" + _base(public_url, host).removeprefix("https://") + STREAM_PATH


def twiml(url: str, parameters: Mapping[str, str] | None = None) -> str:
    """The voice webhook's answer: stream the call to ``url`` (with ``parameters`` as the
    stream's ``customParameters``), hang up when the stream ends."""
    params = "".join(
        f"<Parameter name={quoteattr(name)} value={quoteattr(value)}/>"
        for name, value in (parameters or {}).items()
    )
    stream = (
        f"<Stream url={quoteattr(url)}/>"
        if not params
        else (f"<Stream url={quoteattr(url)}>{params}</Stream>")
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Response><Connect>{stream}</Connect><Hangup/></Response>\n"
    )


def call_parameters(params: Iterable[tuple[str, str]]) -> dict[str, str]:
    """What the stream is told of the call from the webhook's form or query: ``From``, ``To``."""
    wanted = {FROM_PARAMETER, TO_PARAMETER}
    return {name: value[:64] for name, value in params if name in wanted}


def busy_twiml() -> str:
    """The answer past the call cap: a busy signal (Twilio does not bill a rejected call)."""
    return '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Reject reason="busy"/></Response>\n'


def _base(public_url: str | None, host: str | None) -> str:
    return public_base(public_url) if public_url else f"https://{host or 'localhost'}"


class CallSlots:
    """At most ``limit`` calls at once (None: no limit), without I/O.

    ``offer`` (the webhook answers ``<Connect>``) holds a slot for ``hold`` seconds, until the
    call's stream arrives; ``take`` (a stream arrives) turns the oldest held slot into a busy
    one, or takes a free one; ``release`` (the stream ended) frees it.
    """

    def __init__(
        self, limit: int | None, hold: float = 15.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if limit is not None and limit < 1:
            raise UsageError(f"a call cap must be at least 1, not {limit}")
        self.limit = limit
        self.hold = hold
        self.clock = clock
        self.streaming = 0
        self._offered: deque[float] = deque()

    @property
    def held(self) -> int:
        """Slots offered whose stream has not arrived yet (and may still)."""
        now = self.clock()
        while self._offered and now - self._offered[0] >= self.hold:
            self._offered.popleft()
        return len(self._offered)

    def offer(self) -> bool:
        if self.limit is None:
            return True
        if self.streaming + self.held >= self.limit:
            return False
        self._offered.append(self.clock())
        return True

    def take(self) -> bool:
        if self.limit is None:
            pass
        elif self.held:
            self._offered.popleft()
        elif self.limit is not None and self.streaming >= self.limit:
            return False
        self.streaming += 1
        return True

    def release(self) -> None:
        self.streaming -= 1


class _Gate:
    """What the server answers before a WebSocket opens, without I/O: the TwiML for a webhook
    request, a refusal, or None (go on with the upgrade)."""

    def __init__(self, public_url: str | None, auth_token: str | None, slots: CallSlots):
        self.public_url = public_base(public_url) if public_url else None
        self.auth_token = auth_token
        self.slots = slots
        self._logged_at: float | None = None
        self._unlogged = 0

    def answer(self, method: str, target: str, headers: Headers, body: bytes) -> Response | None:
        path = target.partition("?")[0]
        if path == TWIML_PATH:
            return self._webhook(method, target, headers, body)
        if path != STREAM_PATH:
            return _text(HTTPStatus.NOT_FOUND, f"nothing here: the stream is at {STREAM_PATH}")
        if method != "GET":
            return _text(HTTPStatus.METHOD_NOT_ALLOWED, "the stream is a WebSocket", "GET")
        url = stream_url(self.public_url, headers.get("Host"))
        query = target.partition("?")[2]
        if not self._signed(headers, url + (f"?{query}" if query else ""), [], target):
            return _text(HTTPStatus.FORBIDDEN, f"invalid or missing {HEADER}")
        return None  # the upgrade takes a slot (``take``) once it is known to be one

    def _webhook(self, method: str, target: str, headers: Headers, body: bytes) -> Response:
        if method not in ("GET", "POST"):
            return _text(
                HTTPStatus.METHOD_NOT_ALLOWED, "the webhook takes GET or POST", "GET, POST"
            )
        params: list[tuple[str, str]] = []
        if method == "POST":
            kind = headers.get("Content-Type", "").partition(";")[0].strip().lower()
            if kind != "application/x-www-form-urlencoded":
                return _text(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "post the webhook as a form")
            try:
                params = parse_qsl(
                    body.decode(),
                    keep_blank_values=True,
                    strict_parsing=False,
                    max_num_fields=1000,
                )
            except ValueError:  # not UTF-8, or too many fields
                return _text(HTTPStatus.BAD_REQUEST, "a form that cannot be read")
        url = _base(self.public_url, headers.get("Host")) + target
        if not self._signed(headers, url, params, target):
            return _text(HTTPStatus.FORBIDDEN, f"invalid or missing {HEADER}")
        if not self.slots.offer():
            log.warning("answered a call busy: %s calls at once is the cap", self.slots.limit)
            return _xml(busy_twiml())
        told = call_parameters(params if method == "POST" else _query(target))
        return _xml(twiml(stream_url(self.public_url, headers.get("Host")), told))

    def _signed(
        self, headers: Headers, url: str, params: list[tuple[str, str]], target: str
    ) -> bool:
        if self.auth_token is None:
            return True
        if is_signed(self.auth_token, headers.get(HEADER), url, params):
            return True
        self._refused(target)
        return False

    def _refused(self, target: str) -> None:
        now = time.monotonic()
        if self._logged_at is not None and now - self._logged_at < LOG_INTERVAL:
            self._unlogged += 1
            return
        more = f" ({self._unlogged} more since the last warning)" if self._unlogged else ""
        log.warning("refused a request to %.60r: no valid %s%s", target, HEADER, more)
        self._logged_at = now
        self._unlogged = 0


def _query(target: str) -> list[tuple[str, str]]:
    try:
        return parse_qsl(target.partition("?")[2], keep_blank_values=True, max_num_fields=1000)
    except ValueError:  # too many fields
        return []


def _text(status: HTTPStatus, text: str, allow: str | None = None) -> Response:
    headers = Headers({"Content-Type": "text/plain; charset=utf-8"})
    if allow is not None:
        headers["Allow"] = allow
    return _response(status, headers, f"{text}\n".encode())


def _xml(body: str) -> Response:
    return _response(HTTPStatus.OK, Headers({"Content-Type": "text/xml"}), body.encode())


def _response(status: HTTPStatus, headers: Headers, body: bytes) -> Response:
    headers["Content-Length"] = str(len(body))
    return Response(status.value, status.phrase, headers, body)


class _PhoneConnection(ServerConnection):
    """A connection that reads a form ``POST`` itself (the WebSocket server reads no request
    bodies) and holds a call slot from its upgrade until the TCP connection ends."""

    gate: _Gate

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._first = bytearray()  # until the method is known
        self._post: RequestReader | None = None
        self._sorted = False
        self._replied = False
        self.holds_slot = False

    def data_received(self, data: bytes) -> None:
        if self._replied:
            return  # whatever follows a request answered here is not read
        if not self._sorted:
            self._first += data
            if b"POST ".startswith(bytes(self._first[:5])) and len(self._first) < 5:
                return  # not known yet
            self._sorted = True
            data = bytes(self._first)
            self._first.clear()
            if data.startswith(b"POST "):
                self._post = RequestReader()
        if self._post is None:
            super().data_received(data)
            return
        request = self._post.feed(data)
        if isinstance(request, BadRequest):
            self._reply(_text(HTTPStatus(request.status), request.reason))
        elif request is not None:
            self._reply(self._answer_post(request))

    def _answer_post(self, request: PostedRequest) -> Response:
        answer = self.gate.answer(request.method, request.target, request.headers, request.body)
        return answer or _text(HTTPStatus.METHOD_NOT_ALLOWED, "the stream is a WebSocket", "GET")

    def _reply(self, response: Response) -> None:
        self._replied = True
        response.headers["Connection"] = "close"
        self.transport.write(response.serialize())
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.holds_slot:
            self.holds_slot = False
            self.gate.slots.release()
        super().connection_lost(exc)


@asynccontextmanager
async def serve_phone(
    bridge: PhoneBridge,
    host: str = "127.0.0.1",
    port: int = 0,
    public_url: str | None = None,
    *,
    auth_token: str | None = None,
    max_calls: int | None = None,
) -> AsyncIterator[Server]:
    """Serve ``bridge`` on ``host:port`` (0: any free port) until the block is left.

    ``auth_token``: Twilio's auth token; every request must then be signed with it (pass it
    in production: without it anyone who finds the address can open Live sessions).
    ``max_calls``: how many calls at once, at most.
    """
    gate = _Gate(public_url, auth_token, CallSlots(max_calls))

    class Connection(_PhoneConnection):
        pass

    Connection.gate = gate

    def route(connection: ServerConnection, request: Request) -> Response | None:
        method = getattr(request, "method", "GET")  # websockets < 17 reads GET requests only
        answer = gate.answer(method, request.path, request.headers, b"")
        if answer is not None:
            return answer
        if not gate.slots.take():
            log.warning("refused a stream: %s calls at once is the cap", gate.slots.limit)
            return _text(HTTPStatus.SERVICE_UNAVAILABLE, "too many calls at once")
        assert isinstance(connection, _PhoneConnection)
        connection.holds_slot = True
        return None

    async def handler(websocket: ServerConnection) -> None:
        await bridge.serve(websocket)

    async with serve(
        handler,
        host,
        port,
        process_request=route,
        compression=None,
        create_connection=Connection,
    ) as server:
        yield server
