"""One MCP server's client connection, shared by every session of the process.

The MCP SDK's clients are async context managers holding anyio task groups, so one long-lived
task per server (the *host*) owns them: it starts the server (or opens the HTTP session),
initializes, lists the tools, then waits until the connection ends or its last user leaves. A
stdio server that dies is started again, an HTTP session the server forgot is initialized
again, with backoff between failed attempts; each is counted (``restarts``, ``reconnects``).

A call is a thin request over the current connection (``Connection.call``), from the caller's
own task: the SDK correlates concurrent requests; cancelling the caller (a timeout, the model's
cancellation) makes the SDK send ``notifications/cancelled``. A call whose server died is
answered ``unavailable``; one the HTTP server refused for a forgotten session is sent again,
once, on the new session (the server never saw it).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal
from weakref import WeakKeyDictionary

import anyio

from livebridge.errors import (
    MCPBadReplyError,
    MCPError,
    MCPUnavailableError,
    ToolError,
    UsageError,
)
from livebridge.mcp import guard
from livebridge.mcp.server import MCPServer

if TYPE_CHECKING:
    import mcp_types
    from mcp.client.session import ClientSession
    from mcp.shared.dispatcher import ProgressFnT

log = logging.getLogger("livebridge.mcp")

State = Literal["starting", "ready", "down", "stopped"]

#: How long a leaving last user waits for a clean end (stdin closed, DELETE sent) before
#: cancelling the host; the SDK's own shutdown then still stops the process.
_STOP_GRACE = 5.0
_connections: WeakKeyDictionary[MCPServer, Connection] = WeakKeyDictionary()


def connection_for(server: MCPServer) -> Connection:
    """The process's one connection to ``server`` (made on first use)."""
    connection = _connections.get(server)
    if connection is None:
        connection = _connections[server] = Connection(server)
    return connection


def connections() -> list[Connection]:
    """The process's connections to MCP servers still described by a live ``MCPServer``."""
    return list(_connections.values())


def backoff(failures: int) -> float:
    """Seconds before the next attempt after ``failures`` failed ones in a row: the first
    restart is immediate, then 0.5 s doubling up to 10 s."""
    if failures <= 1:
        return 0.0
    return float(min(10.0, 0.5 * 2 ** (failures - 2)))


class Connection:
    """The client side of one MCP server; ``acquire`` / ``release`` by each session."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.users = 0
        self.restarts = 0  # stdio processes started again after one ended
        self.reconnects = 0  # HTTP sessions initialized again
        self.bad_messages = 0  # lines or events that were not JSON-RPC
        self.tools: list[mcp_types.Tool] = []
        self._state: State = "stopped"
        self._failure: BaseException | None = None
        self._ever_ready = False
        self._failed_starts = 0
        self._stopping = False
        self._session: ClientSession | None = None
        self._end: anyio.Event | None = None  # set when the current connection is to end
        self._changed: anyio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def state(self) -> State:
        return self._state

    # -- users -------------------------------------------------------------------------------

    async def acquire(self) -> list[mcp_types.Tool]:
        """Become a user: start the server if it is not running, wait until it listed its
        tools (``server.start_timeout``) and return them; ``MCPError`` if it cannot."""
        loop = asyncio.get_running_loop()
        if self.users and self._loop is not loop:
            raise UsageError(
                f"MCP server {self.server.name!r} is in use on another event loop; its "
                "connection is shared by the sessions of one loop"
            )
        self.users += 1
        try:
            if self._task is None or self._task.done():
                self._start(loop)
            with anyio.move_on_after(self.server.start_timeout + 1.0):
                while not self._settled_for_acquire():
                    await self._wait_change()
            if self._state == "ready":
                return self.tools
            raise MCPError(self.server.name, self._reason())
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.release()
            raise

    def _settled_for_acquire(self) -> bool:
        if self._state == "ready":
            return True
        # Failed before it ever listed its tools: the host may already be trying again.
        return not self._ever_ready and self._failed_starts > 0

    def _reason(self) -> str:
        failure = self._failure
        seconds = f"{self.server.start_timeout:g} s"
        if failure is None or isinstance(failure, TimeoutError):
            return f"did not start and list its tools within {seconds}"
        detail = _describe(failure)
        return f"could not start and list its tools: {detail}"

    async def release(self) -> None:
        """Stop being a user; the last one stops the server and waits for it to end."""
        self.users -= 1
        task = self._task
        if self.users > 0 or task is None:
            return
        self._stopping = True
        if self._end is not None:
            self._end.set()
        self._notify()
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(_STOP_GRACE):
                await asyncio.wait({task})
            if not task.done():
                task.cancel()
                await asyncio.wait({task})
        self._task = None

    # -- calls -------------------------------------------------------------------------------

    async def call(
        self, name: str, arguments: dict[str, Any], on_progress: ProgressFnT | None = None
    ) -> mcp_types.CallToolResult:
        """``tools/call`` over the current connection; failures raise ``ToolError``s that are
        the call's answer (``unavailable``, ``bad_reply``, the server's error text)."""
        from mcp.shared.exceptions import MCPError as SdkError
        from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST
        from pydantic import ValidationError

        for attempt in range(2):
            session, end = await self._ready()
            try:
                return await session.call_tool(name, arguments, progress_callback=on_progress)
            except SdkError as exc:
                if exc.code == CONNECTION_CLOSED:
                    end.set()
                    raise MCPUnavailableError(
                        f"the MCP server {self.server.name!r} went away during the call; it is "
                        "being restarted: try again",
                        retryable=True,
                    ) from None
                if self.server.kind == "http" and attempt == 0 and _forgotten(exc, INVALID_REQUEST):
                    log.info("MCP server %s forgot its session: initializing again", self.server)
                    end.set()
                    continue
                raise ToolError(exc.message or f"MCP error {exc.code}") from None
            except ValidationError as exc:
                self.bad_messages += 1
                log.warning("MCP server %s sent an unreadable result: %s", self.server, exc)
                raise MCPBadReplyError(
                    f"the MCP server {self.server.name!r} sent a reply that is not a tools/call "
                    "result"
                ) from None
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                end.set()
                raise MCPUnavailableError(
                    f"the MCP server {self.server.name!r} is not connected; try again",
                    retryable=True,
                ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def _ready(self) -> tuple[ClientSession, anyio.Event]:
        while True:
            if self._state == "ready" and self._session is not None and self._end is not None:
                if not self._end.is_set():
                    return self._session, self._end
            elif self._state in ("down", "stopped"):
                detail = f": {_describe(self._failure)}" if self._failure is not None else ""
                raise MCPUnavailableError(
                    f"the MCP server {self.server.name!r} is not running{detail}; it is being "
                    "restarted: try again",
                    retryable=True,
                )
            await self._wait_change()

    # -- the host ----------------------------------------------------------------------------

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._stopping = False
        self._ever_ready = False
        self._failed_starts = 0
        self._failure = None
        self._changed = anyio.Event()
        self._state = "starting"
        self._task = loop.create_task(self._host(), name=f"livebridge MCP {self.server.name}")

    def _set(self, state: State, failure: BaseException | None = None) -> None:
        self._state = state
        if failure is not None:
            self._failure = failure
        self._notify()

    def _notify(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        if changed is not None:
            changed.set()

    async def _wait_change(self) -> None:
        changed = self._changed
        assert changed is not None
        await changed.wait()

    async def _host(self) -> None:
        failures = 0
        try:
            while not self._stopping:
                end = self._end = anyio.Event()
                try:
                    async with self._connected(end) as session:
                        failures = 0
                        self._session = session
                        self._ever_ready = True
                        self._set("ready")
                        await end.wait()
                except Exception as exc:
                    failures += 1
                    if not self._ever_ready:
                        self._failed_starts += 1
                    if self._state != "down":
                        self._set("down", exc)
                    # Before it ever listed its tools, the failure is acquire's MCPError.
                    level = logging.WARNING if self._ever_ready else logging.INFO
                    log.log(level, "MCP server %s failed: %s", self.server, _describe(exc))
                self._session = None
                if self._stopping:
                    break
                if self._state == "ready":
                    self._set("down")
                if self.server.kind == "stdio":
                    self.restarts += 1
                else:
                    self.reconnects += 1
                delay = backoff(max(failures, 1))
                if not self._ever_ready:  # its first users are told, and usually leave
                    delay = max(delay, backoff(2))
                if delay:
                    with anyio.move_on_after(delay):
                        while not self._stopping:
                            await self._wait_change()
                if not self._stopping:
                    self._set("starting")
        finally:
            self._session = None
            self._state = "stopped"
            self._notify()

    @asynccontextmanager
    async def _connected(self, end: anyio.Event) -> AsyncIterator[ClientSession]:
        """A transport, a forwarder that notices its end, an initialized session."""
        from mcp.client.session import ClientSession
        from mcp.shared.message import SessionMessage

        async with self._transport() as (read, write):
            send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._forward, read, send, end)
                async with ClientSession(receive, write) as session:
                    try:
                        with anyio.fail_after(self.server.start_timeout):
                            await session.initialize()
                            self.tools = await _list_tools(session)
                    except Exception as exc:  # not a cancellation: the transport's failure
                        self._set("down", exc)  # is the host's to report, not "cancelled"
                        raise
                    yield session
                tg.cancel_scope.cancel()

    def _transport(self) -> AbstractAsyncContextManager[tuple[Any, Any]]:
        server = self.server
        if server.kind == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            command, *args = server.command
            if guard.available():  # the server ends with this process, however it ends
                if shutil.which(command) is None and not server.cwd:
                    raise FileNotFoundError(f"no such command: {command!r}")
                command, args = sys.executable, [guard.__file__, command, *args]
            parameters = StdioServerParameters(
                command=command, args=args, env=dict(server.env or {}), cwd=server.cwd
            )
            return stdio_client(parameters, errlog=sys.stderr)
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        client = create_mcp_http_client(headers=dict(server.headers))
        return _owning(client, streamable_http_client(server.url, http_client=client))

    async def _forward(self, read: Any, send: Any, end: anyio.Event) -> None:
        """Pass every message on to the session; the transport's end ends the connection."""
        try:
            async with send:
                async for item in read:
                    if isinstance(item, Exception):
                        self.bad_messages += 1
                        log.warning(
                            "MCP server %s sent an unreadable message: %s", self.server, item
                        )
                    await send.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            pass
        finally:
            end.set()


@asynccontextmanager
async def _owning(client: Any, transport: Any) -> AsyncIterator[Any]:
    async with client, transport as streams:
        yield streams


async def _list_tools(session: ClientSession) -> list[mcp_types.Tool]:
    from mcp_types import PaginatedRequestParams

    listed = await session.list_tools()
    tools = list(listed.tools)
    while listed.next_cursor:
        listed = await session.list_tools(params=PaginatedRequestParams(cursor=listed.next_cursor))
        tools.extend(listed.tools)
    return tools


def _forgotten(exc: Any, invalid_request: int) -> bool:
    """Did the HTTP server refuse the request for a session it does not know (a 404 with
    "Session not found", or the SDK's "Session terminated" for a bare 404)? It never ran it."""
    message = (exc.message or "").lower()
    unknown = ("not found", "terminated", "expired", "unknown")
    return (
        exc.code == invalid_request and "session" in message and any(w in message for w in unknown)
    )


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "unknown"
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _describe(exc.exceptions[0])
    message = str(getattr(exc, "message", "") or exc)
    if isinstance(exc, TimeoutError):
        return "it did not answer in time"
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
