"""The Prometheus scrape endpoint: a small threaded HTTP server with bounded connections.

Each connection has its own thread, so a connection that opens and then sends nothing (half
open) would hold a thread for as long as the peer likes. Here every connection's socket has a
timeout (``timeout`` seconds without a byte: the connection is closed, its thread ends) and at
most ``max_connections`` are served at once; one beyond that is closed at once, without a
thread. A scrape takes milliseconds, so the bounds are far from what Prometheus needs.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import REGISTRY, CollectorRegistry, make_asgi_app, make_wsgi_app

__all__ = [
    "MAX_CONNECTIONS",
    "TIMEOUT",
    "ASGIApp",
    "MetricsServer",
    "asgi_app",
    "serve",
]

log = logging.getLogger("livebridge.observe.metrics")

#: Connections served at once by default; more are closed as they come.
MAX_CONNECTIONS = 16
#: Seconds a connection may stay silent (its request unread, or unfinished) before it is closed.
TIMEOUT = 10.0


class _Handler(WSGIRequestHandler):
    """Reads with the server's socket timeout; logs nothing per request."""

    server: _Server

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.seconds)

    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged (nor timeouts: a silent peer is routine)."""


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a thread still reading at close never holds the process
    request_queue_size = 128  # the listen backlog: connections beyond it wait in the kernel
    seconds = TIMEOUT
    slots: threading.BoundedSemaphore

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):  # full: no thread for this one
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A peer that went silent or away is routine (no traceback); anything else is logged."""
        error = sys.exc_info()[1]
        if isinstance(error, OSError):
            log.debug("metrics connection from %s ended: %r", client_address, error)
        else:
            log.warning("metrics request from %s failed", client_address, exc_info=error)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class MetricsServer:
    """A running scrape endpoint; ``close()`` stops it and waits for its thread."""

    def __init__(self, server: Any, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread
        self.host: str = server.server_address[0]
        self.port: int = server.server_address[1]

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def serve(
    port: int = 0,
    host: str = "127.0.0.1",
    registry: CollectorRegistry | None = None,
    *,
    max_connections: int = MAX_CONNECTIONS,
    timeout: float = TIMEOUT,
) -> MetricsServer:
    """Serve ``registry`` (default: the global one) in Prometheus/OpenMetrics text format.

    Runs in a background thread; ``port=0`` picks a free port (see ``.port``). The default host
    is loopback only: binding another address exposes the metrics to that network, which must
    be a deliberate choice, and is logged as a warning. At most ``max_connections`` are served
    at once, each closed after ``timeout`` silent seconds.
    """
    if max_connections < 1 or not timeout > 0:
        raise ValueError("max_connections must be at least 1 and timeout positive")
    if not _is_loopback(host):
        log.warning("metrics endpoint bound to %s: reachable beyond this machine", host)
    family, _, _, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]

    class Server(_Server):
        address_family = family
        seconds = timeout
        slots = threading.BoundedSemaphore(max_connections)

    app = make_wsgi_app(REGISTRY if registry is None else registry)
    server = make_server(str(address[0]), port, app, Server, handler_class=_Handler)
    thread = threading.Thread(target=server.serve_forever, name="livebridge-metrics", daemon=True)
    thread.start()
    return MetricsServer(server, thread)


ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
    Awaitable[None],
]


def asgi_app(registry: CollectorRegistry | None = None) -> ASGIApp:
    """An ASGI app serving ``registry`` (default: the global one), to mount in a web server."""
    app: ASGIApp = make_asgi_app(REGISTRY if registry is None else registry)
    return app


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
