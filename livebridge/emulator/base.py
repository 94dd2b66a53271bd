"""What every emulated connection does alike, whatever protocol it speaks: run the model's side
and the read loop in one task group, guard background work, wait on state changes, send through
the faults, queue the user's turns, close.

A protocol's connection subclasses ``Connection`` and supplies ``handle_frame`` (one client frame)
and a ``checker`` (a ``CallChecker``: the calls, and the verdict on those left open).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from livebridge.emulator.contract import Answer, CallChecker, CallRecord, Ending
from livebridge.emulator.judging import ending_of
from livebridge.emulator.shared import Shared, UserTurn, cap_reason
from livebridge.errors import UsageError

INTERNAL_ERROR = "Internal error occurred."
#: Model audio goes out in frames of this many seconds, at real-time pace.
FRAME_SECONDS = 0.04
#: User turns the model has not taken yet, kept at most (the oldest goes first).
MAX_WAITING_TURNS = 64

#: What a connection needs of its checker (its old name).
Verdict = CallChecker


def frame_count(seconds: float) -> int:
    """How many ``FRAME_SECONDS`` frames ``seconds`` of model audio take (at least one)."""
    return max(1, round(seconds / FRAME_SECONDS))


async def pace(start: float, index: int) -> None:
    """Wait until frame ``index + 1`` is due, frames ``FRAME_SECONDS`` apart from ``start`` (the
    loop's clock): real-time pace, however long sending took."""
    loop = asyncio.get_running_loop()
    await asyncio.sleep(max(0.0, start + (index + 1) * FRAME_SECONDS - loop.time()))


class Connection:
    """The server side of one accepted websocket, protocol aside."""

    checker: CallChecker

    def __init__(self, shared: Shared, ws: ServerConnection, session_id: str) -> None:
        self.shared = shared
        self._ws: ServerConnection | None = ws
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
        self.turns: asyncio.Queue[UserTurn] = asyncio.Queue(MAX_WAITING_TURNS)

    @property
    def ws(self) -> ServerConnection:
        """The websocket. A finished connection lets go of it: the socket's TLS buffers and
        compressors (about 300 KB) would otherwise live as long as the connection is reported."""
        if self._ws is None:
            raise UsageError(f"connection {self.id} has finished: its websocket is released")
        return self._ws

    @property
    def pending_calls(self) -> list[CallRecord]:
        """Calls issued and not yet answered, cancelled or superseded."""
        return self.checker.pending()

    @property
    def answered(self) -> dict[str, Answer]:
        """Answers received so far, by call id."""
        calls = self.checker.calls.values()
        return {record.id: record.answer for record in calls if record.answer is not None}

    def queue_turn(self, turn: UserTurn) -> None:
        """Queue a user turn; past ``MAX_WAITING_TURNS`` the oldest goes (reading never waits)."""
        if self.turns.full():
            self.turns.get_nowait()
        self.turns.put_nowait(turn)

    def lost(self, record: dict[str, Any]) -> bool:
        """Whether the ``drop_client`` fault loses this client frame (as recorded)."""
        drop = self.shared.faults.drop_client
        return drop is not None and drop(record)

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
        self._ws = self._group = None  # what the report keeps is the connection's, not the socket's
        self.shared.finished(self)

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

    async def send_frame(
        self,
        payload: dict[str, Any],
        frame: bytes | str,
        *,
        recorded: dict[str, Any] | None = None,
        tool_call: bool = False,
    ) -> None:
        """Send one server frame through the faults: ``delay`` before it, ``drop`` by its
        ``payload`` (recorded all the same, marked ``dropped``), and the cut after a tool call.
        ``recorded``: what the transcript keeps of it (default: ``payload``)."""
        faults = self.shared.faults
        recorded = payload if recorded is None else recorded
        async with self._send_lock:
            if faults.delay:
                await asyncio.sleep(faults.delay)
            dropped = faults.drop is not None and faults.drop(payload)
            self.shared.record(
                "server", self.id, {**recorded, "dropped": True} if dropped else recorded
            )
            if not dropped:
                await self.ws.send(frame)
            if faults.abort_after_tool_call and tool_call and not self._aborted:
                self.abort()

    async def ping_then(self, then: Callable[[asyncio.Future[float]], None]) -> None:
        """Ping the client and call ``then`` with the pong's future once it settles (the
        pong came: the client has read everything sent before the ping; or the connection
        ended first). Nothing is called when the ping cannot be sent."""
        with contextlib.suppress(ConnectionClosed):
            pong = asyncio.ensure_future(await self.ws.ping())
            pong.add_done_callback(then)

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
