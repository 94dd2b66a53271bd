"""What the phone server answers before a call opens, without I/O: the voice webhook's TwiML,
Twilio's signatures, the call cap.

Twilio's voice webhook (a form ``POST``, or a ``GET``) fetches ``/twiml`` and gets
``<Connect><Stream>`` to this server's ``/twilio`` (the call's ``From`` and ``To`` as
``<Parameter>`` values), then ``<Hangup/>``, which runs once the bridge closes the stream. The
public address is ``public_url`` when given (the tunnel or load balancer Twilio reaches,
``https://``, mount point included), else ``https://``, the request's ``Host`` and the app's
mount point.

With an ``auth_token`` every ``/twiml`` request and every ``/twilio`` upgrade must carry
Twilio's signature of the public URL it was made to (``signature``), else it is answered 403
and no Live session opens. With a cap, a call past it is answered with
``<Reject reason="busy"/>`` (a stream past it, 503): the calls counted are those streaming and
those answered with ``<Connect>`` in the last ``CallSlots.hold`` seconds whose stream has not
arrived yet.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import parse_qsl, urlencode, urlsplit
from xml.sax.saxutils import quoteattr

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from livebridge.errors import UsageError
from livebridge.phone import telnyx
from livebridge.phone.agent import FROM_PARAMETER, TO_PARAMETER
from livebridge.phone.signature import HEADER, is_signed

log = logging.getLogger("livebridge.phone")

STREAM_PATH = "/twilio"
TWIML_PATH = "/twiml"
#: Telnyx's paths: its TeXML webhook and its media stream.
TEXML_PATH = "/texml"
TELNYX_PATH = "/telnyx"
#: Seconds between two warnings about refused requests: a flood is counted, not logged each.
LOG_INTERVAL = 10.0
#: Bytes a webhook's form may have (Twilio's is a few hundred bytes to a few kilobytes).
MAX_FORM = 64 * 1024


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


def stream_url(
    public_url: str | None, host: str | None, root: str = "", path: str = STREAM_PATH
) -> str:
    """The ``wss://`` address the provider streams to: ``public_url``'s, else the ``Host``'s
    and the mount point's (``root``)."""
    return "wss://" + _base(public_url, host, root).removeprefix("https://") + path


def twiml(url: str, parameters: Mapping[str, str] | None = None, attributes: str = "") -> str:
    """The voice webhook's answer: stream the call to ``url`` (with ``parameters`` as the
    stream's ``customParameters``, and the ``<Stream>``'s other ``attributes``), hang up when
    the stream ends."""
    params = "".join(
        f"<Parameter name={quoteattr(name)} value={quoteattr(value)}/>"
        for name, value in (parameters or {}).items()
    )
    opening = f"<Stream url={quoteattr(url)}{attributes}"
    stream = f"{opening}>{params}</Stream>" if params else f"{opening}/>"
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


def _base(public_url: str | None, host: str | None, root: str = "") -> str:
    return public_base(public_url) if public_url else f"https://{host or 'localhost'}{root}"


@dataclass(frozen=True, slots=True)
class Reply:
    """An HTTP answer, for the I/O shell to send."""

    status: int
    body: str
    content_type: str = "text/plain; charset=utf-8"
    allow: str | None = None


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


class Gate:
    """What the server answers before a WebSocket opens: the TwiML for a webhook request, a
    refusal, or None (go on with the upgrade). ``target`` is the path within the app (after
    its mount point, ``root``) and the query."""

    def __init__(self, public_url: str | None, auth_token: str | None, slots: CallSlots):
        self.public_url = public_base(public_url) if public_url else None
        self.auth_token = auth_token
        self.slots = slots
        self._logged_at: float | None = None
        self._unlogged = 0

    def upgrade(self, target: str, headers: Mapping[str, str], root: str = "") -> Reply | None:
        """None: the stream may open (it then takes a slot, ``slots.take``)."""
        url = stream_url(self.public_url, headers.get("host"), root, self.stream_path)
        query = target.partition("?")[2]
        if not self._signed(headers, url + (f"?{query}" if query else ""), [], target):
            return _text(HTTPStatus.FORBIDDEN, f"invalid or missing {HEADER}")
        return None

    def webhook(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes, root: str = ""
    ) -> Reply:
        """The answer to a ``/twiml`` request (``headers`` by lower-case name)."""
        if method not in ("GET", "POST"):
            return _text(
                HTTPStatus.METHOD_NOT_ALLOWED, "the webhook takes GET or POST", "GET, POST"
            )
        params: list[tuple[str, str]] = []
        if method == "POST":
            kind = headers.get("content-type", "").partition(";")[0].strip().lower()
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
        url = _base(self.public_url, headers.get("host"), root) + target
        if not self._webhook_signed(headers, url, params, body, target):
            return _text(HTTPStatus.FORBIDDEN, f"invalid or missing {self.signature_header}")
        if not self.slots.offer():
            log.warning("answered a call busy: %s calls at once is the cap", self.slots.limit)
            return _xml(busy_twiml())
        fields = params if method == "POST" else _query(target)
        url = stream_url(self.public_url, headers.get("host"), root, self.stream_path)
        return _xml(self._connect(url, fields))

    # -- what differs from one provider to another ---------------------------------------------

    stream_path = STREAM_PATH
    signature_header = HEADER

    def _webhook_signed(
        self,
        headers: Mapping[str, str],
        url: str,
        params: list[tuple[str, str]],
        body: bytes,
        target: str,
    ) -> bool:
        return self._signed(headers, url, params, target)

    def _connect(self, url: str, fields: list[tuple[str, str]]) -> str:
        return twiml(url, call_parameters(fields))

    def _signed(
        self, headers: Mapping[str, str], url: str, params: list[tuple[str, str]], target: str
    ) -> bool:
        if self.auth_token is None:
            return True
        if is_signed(self.auth_token, headers.get(HEADER.lower()), url, params):
            return True
        self._refused(target)
        return False

    def _refused(self, target: str) -> None:
        now = time.monotonic()
        if self._logged_at is not None and now - self._logged_at < LOG_INTERVAL:
            self._unlogged += 1
            return
        more = f" ({self._unlogged} more since the last warning)" if self._unlogged else ""
        what = self.signature_header
        log.warning("refused a request to %.60r: no valid %s%s", target, what, more)
        self._logged_at = now
        self._unlogged = 0


def _query(target: str) -> list[tuple[str, str]]:
    try:
        return parse_qsl(target.partition("?")[2], keep_blank_values=True, max_num_fields=1000)
    except ValueError:  # too many fields
        return []


def _text(status: HTTPStatus, text: str, allow: str | None = None) -> Reply:
    return Reply(status.value, f"{text}\n", allow=allow)


def _xml(body: str) -> Reply:
    return Reply(HTTPStatus.OK.value, body, "text/xml")


class TelnyxGate(Gate):
    """The same door for Telnyx: TeXML at ``/texml`` (an Ed25519-signed webhook, checked with
    ``key``), the stream at ``/telnyx`` with the token the TeXML gave (``secret``)."""

    stream_path = TELNYX_PATH
    signature_header = telnyx.SIGNATURE_HEADER

    def __init__(
        self,
        public_url: str | None,
        key: Ed25519PublicKey | None,
        slots: CallSlots,
        secret: bytes,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(public_url, None, slots)
        self.key = key
        self.secret = secret
        self.clock = clock

    def _webhook_signed(
        self,
        headers: Mapping[str, str],
        url: str,
        params: list[tuple[str, str]],
        body: bytes,
        target: str,
    ) -> bool:
        if self.key is None:
            return True
        signature = headers.get(telnyx.SIGNATURE_HEADER)
        stamp = headers.get(telnyx.TIMESTAMP_HEADER)
        if telnyx.is_signed(self.key, signature, stamp, body, self.clock()):
            return True
        self._refused(target)
        return False

    def _connect(self, url: str, fields: list[tuple[str, str]]) -> str:
        call = dict(fields).get("CallSid", "")[:128]
        expires = int(self.clock()) + telnyx.TOKEN_SECONDS
        token = telnyx.stream_token(self.secret, call, expires)
        query = urlencode({"call": call, "expires": str(expires), "token": token})
        attributes = ' bidirectionalMode="rtp" bidirectionalCodec="PCMU"'
        return twiml(f"{url}?{query}", call_parameters(fields), attributes)

    def upgrade(self, target: str, headers: Mapping[str, str], root: str = "") -> Reply | None:
        query = dict(_query(target))
        call, expires, token = (query.get(k, "") for k in ("call", "expires", "token"))
        if telnyx.token_valid(self.secret, call, expires, token, self.clock()):
            return None
        self._refused(target)
        return _text(HTTPStatus.FORBIDDEN, "invalid, expired or missing stream token")
