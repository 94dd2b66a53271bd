"""The phone line as an ASGI app: ``/twiml`` (the voice webhook) and ``/twilio`` (the Media
Streams WebSocket), or Telnyx's ``/texml`` and ``/telnyx``, mountable under a prefix in a
Starlette or FastAPI app.

``asgi_app(agent)`` is what ``livebridge phone`` serves with uvicorn, and what a backend mounts
in the app it already runs: ``Mount("/phone", app=asgi_app(agent, public_url=
"https://voice.example.com/phone"))`` answers the webhook at ``…/phone/twiml`` and streams at
``wss://voice.example.com/phone/twilio``. What is answered before a call opens is ``gate``'s;
each accepted stream is one call of the ``PhoneBridge``.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Callable, Sequence
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import Scope
from starlette.websockets import WebSocket, WebSocketDisconnect

from livebridge.calls.observers import Observer
from livebridge.errors import UsageError
from livebridge.live.options import SessionOptions
from livebridge.phone import telnyx
from livebridge.phone.agent import AgentSource, session_opener
from livebridge.phone.bridge import Listener, MediaCodec, PhoneBridge, PhoneOptions
from livebridge.phone.gate import (
    MAX_FORM,
    STREAM_PATH,
    TELNYX_PATH,
    TEXML_PATH,
    TWIML_PATH,
    CallSlots,
    Gate,
    Reply,
    TelnyxGate,
)
from livebridge.phone.telnyx import TelnyxStream
from livebridge.phone.twilio import TwilioStream

log = logging.getLogger("livebridge.phone")

#: What ends a WebSocket under the app: the peer left, the socket was closed, the server's
#: transport is gone.
_GONE = (WebSocketDisconnect, RuntimeError, OSError)


class StarletteCallSocket:
    """A Starlette ``WebSocket`` as the bridge's ``CallSocket``: a peer that left is the end
    of the messages, not an error."""

    def __init__(self, websocket: WebSocket) -> None:
        self.websocket = websocket
        self._open = True

    async def receive(self) -> str | bytes | None:
        if not self._open:
            return None
        try:
            message = await self.websocket.receive()
        except _GONE:
            message = {"type": "websocket.disconnect"}
        if message["type"] == "websocket.disconnect":
            self._open = False
            return None
        text: str | None = message.get("text")
        if text is not None:
            return text
        data: bytes | None = message.get("bytes")
        return data if data is not None else b""

    async def send(self, text: str) -> None:
        if not self._open:
            return
        try:
            await self.websocket.send_text(text)
        except _GONE:
            self._open = False

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self._open = False
        with contextlib.suppress(*_GONE):  # closed already, or the peer left
            await self.websocket.close(code, reason)


def asgi_app(
    agent: AgentSource | PhoneBridge,
    *,
    public_url: str | None = None,
    auth_token: str | None = None,
    max_calls: int | None = None,
    client: Any = None,
    listeners: Sequence[Listener] = (),
    observers: Sequence[Observer] = (),
    options: PhoneOptions | None = None,
    session_options: SessionOptions | None = None,
    provider: Literal["twilio", "telnyx"] = "twilio",
    telnyx_public_key: str | None = None,
    stream_secret: bytes | None = None,
) -> Starlette:
    """The phone line's two routes as a Starlette app.

    ``agent``: a ``ToolRegistry``, a ``PhoneAgent``, a function ``agent(call) -> PhoneAgent``,
    or a ready ``PhoneBridge`` (then ``client``, ``listeners``, ``observers`` and the options are
    its own). ``public_url``: the app's own public ``https://`` address, mount point included
    (default: ``https://``, the request's ``Host`` and the mount point). ``auth_token``:
    Twilio's auth token; every request must then be signed with it (pass it in production:
    without it anyone who finds the address can open Live sessions). ``max_calls``: how many
    calls at once, at most. ``client``: a ``genai.Client`` or an ``openai.AsyncOpenAI``
    (default: ``genai.Client()``, configured by its environment variables).

    ``provider="telnyx"``: the routes are ``/texml`` and ``/telnyx``; ``telnyx_public_key``
    (base64, ``TELNYX_PUBLIC_KEY``) checks the webhooks' Ed25519 signatures, and each stream
    needs the token the signed webhook's answer gave, made with ``stream_secret`` (default: a
    random one; give every worker behind one address the same).
    """
    if provider not in ("twilio", "telnyx"):
        raise UsageError(f"the provider is 'twilio' or 'telnyx', not {provider!r}")
    codec: Callable[[], MediaCodec] = TelnyxStream if provider == "telnyx" else TwilioStream
    if isinstance(agent, PhoneBridge):
        bridge = agent
    else:
        if client is None:
            from google import genai

            client = genai.Client()
        opener = session_opener(agent, client, observers=observers, options=session_options)
        bridge = PhoneBridge(opener, options=options, listeners=listeners, codec=codec)
    gate: Gate
    if provider == "telnyx":
        key = telnyx.public_key(telnyx_public_key) if telnyx_public_key else None
        secret = stream_secret or secrets.token_bytes(32)
        gate = TelnyxGate(public_url, key, CallSlots(max_calls), secret)
        webhook_path, stream_path = TEXML_PATH, TELNYX_PATH
    else:
        gate = Gate(public_url, auth_token, CallSlots(max_calls))
        webhook_path, stream_path = TWIML_PATH, STREAM_PATH

    async def webhook(request: Request) -> Response:
        root, target = _where(request.scope)
        body = b""
        if request.method == "POST":
            length = request.headers.get("content-length", "")
            if length and (not length.isdigit() or len(length) > 9 or int(length) > MAX_FORM):
                return _response(Reply(413, "request body too large\n"))
            data = bytearray()
            async for chunk in request.stream():
                data += chunk
                if len(data) > MAX_FORM:
                    return _response(Reply(413, "request body too large\n"))
            body = bytes(data)
        return _response(gate.webhook(request.method, target, request.headers, body, root))

    async def not_upgraded(request: Request) -> Response:
        return _response(Reply(426, "the stream is a WebSocket: upgrade\n", allow="GET"))

    async def stream(websocket: WebSocket) -> None:
        root, target = _where(websocket.scope)
        refusal = gate.upgrade(target, websocket.headers, root)
        if refusal is None and not gate.slots.take():
            log.warning("refused a stream: %s calls at once is the cap", gate.slots.limit)
            refusal = Reply(503, "too many calls at once\n")
        if refusal is not None:
            await _deny(websocket, refusal)
            return
        try:
            await websocket.accept()
            await bridge.serve(StarletteCallSocket(websocket))
        finally:
            gate.slots.release()

    return Starlette(
        routes=[
            Route(webhook_path, webhook, methods=["GET", "POST"]),
            Route(stream_path, not_upgraded, methods=["GET"]),
            WebSocketRoute(stream_path, stream),
        ]
    )


def _where(scope: Scope) -> tuple[str, str]:
    """The app's mount point and the request's path within it, with the query."""
    root: str = scope.get("root_path", "")
    path: str = scope["path"]
    inner = path[len(root) :] if root and path.startswith(root) else path
    query = scope.get("query_string", b"").decode("latin-1")
    return root, inner + (f"?{query}" if query else "")


def _response(reply: Reply) -> Response:
    headers = {"Allow": reply.allow} if reply.allow is not None else None
    return Response(reply.body, reply.status, headers, reply.content_type)


async def _deny(websocket: WebSocket, reply: Reply) -> None:
    """Refuse an upgrade with ``reply``'s status (403 where the server cannot say more)."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(_response(reply))
    else:
        await websocket.close(1008)
