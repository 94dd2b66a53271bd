"""The phone bridge's server: Media Streams at ``/twilio``, the voice webhook at ``/twiml``.

Twilio's voice webhook fetches ``/twiml`` (set its method to GET: this server reads no request
bodies) and gets ``<Connect><Stream>`` to this server's ``/twilio``, then ``<Hangup/>``, which
runs once the bridge closes the stream. The stream's public address is ``public_url`` when
given (the tunnel or load balancer Twilio reaches), else the request's ``Host``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit
from xml.sax.saxutils import quoteattr

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from livebridge.phone.bridge import PhoneBridge

__all__ = ["STREAM_PATH", "TWIML_PATH", "serve_phone", "stream_url", "twiml"]

STREAM_PATH = "/twilio"
TWIML_PATH = "/twiml"


def stream_url(public_url: str | None, host: str | None) -> str:
    """The ``wss://`` address Twilio streams to: ``public_url``'s host, else the ``Host``."""
    if public_url:
        parts = urlsplit(public_url if "//" in public_url else f"//{public_url}")
        scheme = "ws" if parts.scheme in ("http", "ws") else "wss"
        return f"{scheme}://{parts.netloc}{parts.path.rstrip('/')}{STREAM_PATH}"
    return f"wss://{host or 'localhost'}{STREAM_PATH}"


def twiml(url: str) -> str:
    """The voice webhook's answer: stream the call to ``url``, hang up when the stream ends."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Response><Connect><Stream url={quoteattr(url)}/></Connect><Hangup/></Response>\n"
    )


@asynccontextmanager
async def serve_phone(
    bridge: PhoneBridge, host: str = "127.0.0.1", port: int = 0, public_url: str | None = None
) -> AsyncIterator[Server]:
    """Serve ``bridge`` on ``host:port`` (0: any free port) until the block is left."""

    def route(connection: ServerConnection, request: Request) -> Response | None:
        path = request.path.partition("?")[0]
        if path == TWIML_PATH:
            body = twiml(stream_url(public_url, request.headers.get("Host"))).encode()
            headers = Headers({"Content-Type": "text/xml", "Content-Length": str(len(body))})
            return Response(200, "OK", headers, body)
        if path != STREAM_PATH:
            return connection.respond(404, f"nothing here: the stream is at {STREAM_PATH}\n")
        return None

    async def handler(websocket: ServerConnection) -> None:
        await bridge.serve(websocket)

    async with serve(handler, host, port, process_request=route, compression=None) as server:
        yield server
