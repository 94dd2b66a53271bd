"""What every emulated connection does alike, whatever protocol it speaks: run the model's side
and the read loop in one task group, guard background work, wait on state changes, close.

A protocol's connection subclasses ``Connection`` and supplies ``handle_frame`` (one client frame)
and a ``checker`` with ``finish(ending)`` (the verdict on the calls left open).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from livebridge.emulator.contract import Ending
from livebridge.emulator.frames import ending_of
from livebridge.emulator.shared import Shared, cap_reason

__all__ = ["INTERNAL_ERROR", "Connection", "Verdict"]

INTERNAL_ERROR = "Internal error occurred."


class Verdict(Protocol):
    """The part of a checker the connection needs: judge the calls left open at the end."""

    def finish(self, ending: Ending) -> None: ...


class Connection:
    """The server side of one accepted websocket, protocol aside."""

    checker: Verdict

    def __init__(self, shared: Shared, ws: ServerConnection, session_id: str) -> None:
        self.shared = shared
        self.ws = ws
        self.id = session_id
        self.errors: list[str] = []
        self.close_info: dict[str, Any] | None = None
        self.server_closed = False
        self.finished = False
        self._cond = asyncio.Condition()
        self._send_lock = asyncio.Lock()
        self._group: asyncio.TaskGroup | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._aborted = False

    async def handle_frame(self, frame: str | bytes) -> None:
        """Act on one client frame."""
        raise NotImplementedError

    async def converse(self, model: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``model`` and the read loop in one task group; when the client's side ends,
        everything the connection started is cancelled and waited for, then it is judged."""
        async with asyncio.TaskGroup() as group:
            self._group = group
            self.spawn(model())
            try:
                ending = await self.read_loop()
            finally:
                for task in list(self._tasks):
                    task.cancel()
        self.finish(ending)

    def finish(self, ending: Ending) -> None:
        """Judge the calls left open; ``finished`` tells readers the verdict is final."""
        self.checker.finish(ending)
        self.close_info = {"code": self.ws.close_code, "reason": self.ws.close_reason}
        self.finished = True
        self.shared.notify()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run work in this connection's task group; a failure in it is the service's
        internal error: recorded in ``errors``, and the client sees 1011."""
        if self._group is None:
            raise RuntimeError("background work starts only once the connection is conversing")
        task = self._group.create_task(self._guarded(coro))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _guarded(self, coro: Coroutine[Any, Any, None]) -> None:
        try:
            await coro
        except ConnectionClosed:
            return
        except Exception as error:  # reported, and the client sees 1011
            self.errors.append(f"{type(error).__name__}: {error}")
            self.shared.notify()
            await self.close(1011, INTERNAL_ERROR)

    async def _changed(self) -> None:
        async with self._cond:
            self._cond.notify_all()
        self.shared.notify()

    async def wait_until(
        self,
        predicate: Callable[[], bool],
        timeout: float | None = None,  # noqa: ASYNC109 (part of the scenario API)
    ) -> None:
        """Wait until ``predicate()`` holds; re-checked on every state change of this connection."""
        async with asyncio.timeout(timeout), self._cond:
            await self._cond.wait_for(predicate)

    async def read_loop(self) -> Ending:
        """Read and act on client frames until the connection closes; returns how it ended."""
        read_delay = self.shared.faults.read_delay
        while True:
            if read_delay and not self._aborted:
                await asyncio.sleep(read_delay)
            try:
                frame = await self.ws.recv()
            except ConnectionClosed as closed:
                ending, close = ending_of(
                    closed, server_closed=self.server_closed or self.shared.stopping
                )
                if close is not None:
                    self.shared.record("client", self.id, close)
                return ending
            if self._aborted:
                continue  # a cut connection acts on nothing it had buffered; recv soon says so
            try:
                await self.handle_frame(frame)
            except ConnectionClosed:
                continue  # the connection ended while answering: the next recv says how

    async def send_raw(self, frame: bytes | str) -> None:
        """Send ``frame`` exactly as given: for testing how clients take malformed messages."""
        async with self._send_lock:
            text = frame.decode("utf-8", "replace") if isinstance(frame, bytes) else frame
            self.shared.record("server", self.id, {"raw": text})
            await self.ws.send(frame)

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Close with a code and a reason (cut to 123 bytes)."""
        reason = cap_reason(reason)
        self.server_closed = True
        self.shared.record("server", self.id, {"close": {"code": code, "reason": reason}})
        await self.ws.close(code, reason)

    def abort(self) -> None:
        """Cut the connection without a close frame."""
        self._aborted = True
        self.server_closed = True
        self.shared.record("server", self.id, {"close": {"code": 1006, "reason": "aborted"}})
        self.ws.transport.abort()
