"""The Prometheus scrape endpoint: an asyncio HTTP server in a thread, bounded per connection.

A thread-per-connection server lets a few idle or slow sockets (slowloris) hold every thread
and lock Prometheus out. Here one event loop holds the connections, a few kilobytes each, and
every bound is in time and bytes as well as count:

- a connection has ``timeout`` seconds *in all* (from accept to the last byte of the answer):
  a request head trickled a byte at a time is cut at the deadline like a silent one;
- a request head over ``MAX_HEAD_BYTES`` is answered 431 and closed, never buffered further;
- at most ``max_connections`` are open; one more closes the oldest connection still reading
  its request head, so a scrape (a whole request in one packet) always gets in however many
  sockets idle; only when every open connection is being answered is the new one closed;
- one request per connection (``Connection: close``), answered by prometheus_client's WSGI
  app in a worker thread (content negotiation, gzip, ``name[]`` filters as usual), so a slow
  collector never stalls the loop; at most ``RENDERS`` answers are rendered at once, and a
  request cut at its deadline while it waits for its turn costs no render at all (a flood of
  complete requests queues no work beyond the connections' deadlines).

The loop works on the raw sockets (``sock_recv``/``sock_sendall``) and each connection's task
closes its own socket, so a connection that arrives while the server closes is never left to
the garbage collector.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from prometheus_client import REGISTRY, CollectorRegistry, make_asgi_app, make_wsgi_app

log = logging.getLogger("livebridge.observe.metrics")

#: Connections open at once by default; one more closes the oldest still reading its request.
MAX_CONNECTIONS = 256
#: Seconds a connection may last in all, from accept to the end of the answer.
TIMEOUT = 10.0
#: Bytes a request head (request line and headers) may take; a longer one is answered 431.
MAX_HEAD_BYTES = 8192
#: Answers rendered at once (each walks the whole registry); more requests wait their turn.
RENDERS = 2

_END = b"\r\n\r\n"
_ACCEPTS_PER_WAKE = 64  # then the loop serves what it has before accepting more

_Wsgi = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


@dataclass(frozen=True, slots=True)
class Request:
    """A parsed request head: what the WSGI app needs."""

    method: str
    path: str
    query: str
    headers: dict[str, str]


def parse_head(head: bytes) -> Request | int:
    """The request in ``head`` (up to and including the blank line), or the status that
    refuses it (400 malformed, 505 not HTTP/1.x)."""
    try:
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ")
    except ValueError:
        return 400
    if not version.startswith("HTTP/1."):
        return 505
    if not method.isalpha() or not target.startswith("/"):
        return 400
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            return 400
        headers[name.lower()] = value.strip()
    path, _, query = target.partition("?")
    return Request(method, unquote(path), query, headers)


class _Endpoint:
    """The connections of one server, on its event loop."""

    def __init__(self, app: _Wsgi, max_connections: int, timeout: float, port: int) -> None:
        self.app = app
        self.renderers = ThreadPoolExecutor(RENDERS, thread_name_prefix="livebridge-metrics")
        self.max_connections = max_connections
        self.timeout = timeout
        self.port = port
        self.tasks: set[asyncio.Task[None]] = set()  # every connection's, started or not
        self.open: set[asyncio.Task[None]] = set()  # started and holding a slot
        self.reading: dict[asyncio.Task[None], None] = {}  # still reading the head, oldest first
        self.renders = asyncio.Semaphore(RENDERS)
        self.closing = False

    def accept(self, listener: socket.socket) -> None:
        """The listener is readable: take what is waiting (a callback, so nothing accepted can
        be lost to a cancellation between accept and task)."""
        for _ in range(_ACCEPTS_PER_WAKE):
            try:
                connection, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of descriptors: the backlog waits in the kernel
                log.warning("metrics endpoint cannot accept for a second: %r", exc)
                loop = asyncio.get_running_loop()
                loop.remove_reader(listener)
                loop.call_later(1.0, self._resume, listener)
                return
            connection.setblocking(False)
            task = asyncio.get_running_loop().create_task(self.connection(connection))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    def _resume(self, listener: socket.socket) -> None:
        if not self.closing:
            asyncio.get_running_loop().add_reader(listener, self.accept, listener)

    async def connection(self, connection: socket.socket) -> None:
        with connection:  # closed here whatever happens: no socket outlives its task
            if self.closing or (len(self.open) >= self.max_connections and not self._make_room()):
                return  # every slot is answering a request: this one waits no more
            task = asyncio.current_task()
            assert task is not None
            self.open.add(task)
            self.reading[task] = None
            try:
                async with asyncio.timeout(self.timeout):
                    await self._exchange(connection, task)
            except (TimeoutError, OSError) as exc:
                log.debug("metrics connection ended: %r", exc)  # a silent or gone peer: routine
            except asyncio.CancelledError:
                pass  # pushed out by a newer connection, or the server closes
            except Exception:
                log.warning("metrics request failed", exc_info=sys.exc_info()[1])
            finally:
                self.open.discard(task)
                self.reading.pop(task, None)

    def _make_room(self) -> bool:
        """Close the oldest connection still reading its head; False when there is none."""
        for oldest in self.reading:
            del self.reading[oldest]
            self.open.discard(oldest)
            oldest.cancel()
            return True
        return False

    async def _exchange(self, connection: socket.socket, task: asyncio.Task[None]) -> None:
        head = await _read_head(connection)
        self.reading.pop(task, None)
        if head is None:
            await _answer(connection, 431, [], b"request head too large\n")
            return
        request = parse_head(head)
        if isinstance(request, int):
            await _answer(connection, request, [], b"bad request\n")
            return
        peer = connection.getpeername()
        await self.renders.acquire()
        rendering = asyncio.get_running_loop().run_in_executor(
            self.renderers, self._call_app, request, peer
        )
        rendering.add_done_callback(lambda _: self.renders.release())  # when the thread is done
        status, headers, body = await asyncio.shield(rendering)  # a cut request: it finishes
        await _answer(connection, status, headers, b"" if request.method == "HEAD" else body)

    def _call_app(
        self, request: Request, peer: tuple[Any, ...]
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        """Run the WSGI app (in a worker thread)."""
        environ: dict[str, Any] = {
            "REQUEST_METHOD": request.method,
            "PATH_INFO": request.path,
            "QUERY_STRING": request.query,
            "SERVER_NAME": "livebridge",
            "SERVER_PORT": str(self.port),
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": str(peer[0]),
            "wsgi.url_scheme": "http",
        }
        for name, value in request.headers.items():
            environ["HTTP_" + name.upper().replace("-", "_")] = value
        started: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]], *_: Any) -> None:
            started[:] = [int(status.split(" ", 1)[0]), headers]

        body = b"".join(self.app(environ, start_response))
        return started[0], started[1], body

    async def close(self) -> None:
        """End every connection: cancel those started, let those not yet started see
        ``closing`` and close their socket themselves."""
        self.closing = True
        while self.tasks:
            for task in self.open:
                task.cancel()
            await asyncio.wait(set(self.tasks))


async def _read_head(connection: socket.socket) -> bytes | None:
    """The request head up to its blank line, or None past ``MAX_HEAD_BYTES`` (what follows
    it, a body, is never read: the answer closes the connection)."""
    loop = asyncio.get_running_loop()
    head = bytearray()
    while True:
        chunk = await loop.sock_recv(connection, MAX_HEAD_BYTES + len(_END) - len(head))
        if not chunk:
            raise ConnectionResetError("closed before the end of its request head")
        searched = max(0, len(head) - len(_END) + 1)
        head += chunk
        end = head.find(_END, searched)
        if end >= 0:
            return bytes(head[: end + len(_END)])
        if len(head) > MAX_HEAD_BYTES:
            return None


async def _answer(
    connection: socket.socket, status: int, headers: list[tuple[str, str]], body: bytes
) -> None:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
    lines += [f"{name}: {value}" for name, value in headers if name.lower() != "content-length"]
    lines += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
    data = "\r\n".join(lines).encode("latin-1") + body
    await asyncio.get_running_loop().sock_sendall(connection, data)  # within the deadline
    connection.shutdown(socket.SHUT_WR)


_REASONS = {
    200: "OK",
    400: "Bad Request",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    505: "HTTP Version Not Supported",
}


class MetricsServer:
    """A running scrape endpoint; ``close()`` stops it and waits for its thread (not for a
    render in progress: a collector that hangs finishes alone, its connection already closed)."""

    def __init__(
        self,
        endpoint: _Endpoint,
        loop: asyncio.AbstractEventLoop,
        stop: asyncio.Event,
        thread: threading.Thread,
        address: tuple[Any, ...],
    ) -> None:
        self._endpoint = endpoint
        self._loop = loop
        self._stop = stop
        self._thread = thread
        self.host: str = address[0]
        self.port: int = address[1]

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    @property
    def connections(self) -> int:
        """Connections open now (a reading, not a guarantee: they come and go)."""
        return len(self._endpoint.open)

    def close(self) -> None:
        if self._thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop already ended
                self._loop.call_soon_threadsafe(self._stop.set)
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
    be a deliberate choice, and is logged as a warning. At most ``max_connections`` are open at
    once (one more closes the oldest still sending its request), each for ``timeout`` seconds
    in all.
    """
    if max_connections < 1 or not timeout > 0:
        raise ValueError("max_connections must be at least 1 and timeout positive")
    if not _is_loopback(host):
        log.warning("metrics endpoint bound to %s: reachable beyond this machine", host)
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(128)  # connections beyond it wait in the kernel
        listener.setblocking(False)
    except BaseException:
        listener.close()
        raise
    bound = listener.getsockname()
    app: _Wsgi = make_wsgi_app(REGISTRY if registry is None else registry)
    endpoint = _Endpoint(app, max_connections, timeout, bound[1])
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    async def run() -> None:
        loop.add_reader(listener, endpoint.accept, listener)
        try:
            await stop.wait()
        finally:
            loop.remove_reader(listener)
            listener.close()
            await endpoint.close()

    def main() -> None:
        try:
            loop.run_until_complete(run())
        finally:
            endpoint.renderers.shutdown(wait=False)  # a collector that hangs never holds close()
            loop.close()

    thread = threading.Thread(target=main, name="livebridge-metrics", daemon=True)
    thread.start()  # connections wait in the listen backlog until the loop runs
    return MetricsServer(endpoint, loop, stop, thread, bound)


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
