"""The phone line served: ``asgi.asgi_app`` on uvicorn, on a socket bound before it starts.

``serve_app`` serves any ASGI app (the phone line alone, or mounted in a bigger app) until the
block is left; ``serve_phone`` serves the phone line's. uvicorn's signal handling is left out:
the program that serves decides what a signal does (``livebridge phone`` stops on SIGINT and
SIGTERM).
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import uvicorn

from livebridge.phone.agent import AgentSource
from livebridge.phone.asgi import asgi_app
from livebridge.phone.bridge import PhoneBridge

#: Bytes a Media Streams message may have (Twilio's are a few hundred).
MAX_MESSAGE = 1024 * 1024
#: Seconds the calls still open at shutdown get to end before they are cut.
SHUTDOWN_GRACE = 10.0


@dataclass(frozen=True, slots=True)
class PhoneServer:
    """A listening server: its sockets and its port."""

    sockets: tuple[socket.socket, ...]
    port: int


class _Uvicorn(uvicorn.Server):
    """uvicorn, telling when it listens, leaving signals to the program."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = anyio.Event()

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()


@asynccontextmanager
async def serve_app(app: Any, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[PhoneServer]:
    """Serve the ASGI ``app`` with uvicorn on ``host:port`` (0: any free port) until the
    block is left. Raises ``OSError`` when the address cannot be bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.create_server((host, port), family=family, reuse_port=False)
    config = uvicorn.Config(
        app,
        log_config=None,
        access_log=False,
        lifespan="off",
        ws="websockets-sansio",
        ws_max_size=MAX_MESSAGE,
        timeout_graceful_shutdown=int(SHUTDOWN_GRACE),
    )
    server = _Uvicorn(config)

    async def run() -> None:
        try:
            await server.serve([listening])
        finally:
            server.ready.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await server.ready.wait()
            if not server.started:
                raise OSError(f"the server on {host}:{port} did not start")
            try:
                yield PhoneServer((listening,), listening.getsockname()[1])
            finally:
                server.should_exit = True
    except BaseExceptionGroup as group:  # the block's own exception, as it was raised
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    finally:
        listening.close()


@asynccontextmanager
async def serve_phone(
    agent: AgentSource | PhoneBridge,
    host: str = "127.0.0.1",
    port: int = 0,
    public_url: str | None = None,
    *,
    auth_token: str | None = None,
    max_calls: int | None = None,
    client: Any = None,
    provider: Literal["twilio", "telnyx"] = "twilio",
    telnyx_public_key: str | None = None,
) -> AsyncIterator[PhoneServer]:
    """Serve the phone line of ``agent`` (``asgi_app``'s) on ``host:port`` until the block
    is left.

    ``auth_token``: Twilio's auth token; every request must then be signed with it (pass it
    in production: without it anyone who finds the address can open Live sessions).
    ``max_calls``: how many calls at once, at most. ``provider="telnyx"``: Telnyx's
    routes, its webhooks checked with ``telnyx_public_key`` (``asgi_app``).
    """
    app = asgi_app(
        agent,
        public_url=public_url,
        auth_token=auth_token,
        max_calls=max_calls,
        client=client,
        provider=provider,
        telnyx_public_key=telnyx_public_key,
    )
    async with serve_app(app, host, port) as server:
        yield server
