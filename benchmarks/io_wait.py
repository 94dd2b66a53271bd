"""A handler that waits as a real tool does: on I/O, not on an event-loop timer.

``asyncio.sleep(0.05)`` is a timer, and asyncio's epoll wait is rounded up to whole
milliseconds: the loop's last ``select`` before the timer is due sleeps ``ceil(remaining)`` ms,
so a timer fires late by about as long as the loop stayed busy after it was set (up to 1 ms). A
client that does any work after starting its handlers (delivering ``ToolCallStarted`` to the app,
say) sees that work added to its handlers' time, one for one, on top of its own cost. A tool
that calls a service is woken by its socket instead, the moment the reply lands, whatever the
loop did meanwhile.

``io_work`` waits like that: a backend thread (one per process, standing in for the service
the tool calls) keeps the deadlines and completes each wait through the loop's self-pipe
(``call_soon_threadsafe``), which wakes ``select`` at once. Every client in
``benchmarks.clients`` uses it the same way when ``bench_turns --handler io`` swaps it in.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
import time


class Backend:
    """A thread that completes futures at their deadlines, as replies from a service would."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._changed = threading.Condition()
        threading.Thread(target=self._run, name="io-backend", daemon=True).start()

    def wait(self, seconds: float) -> asyncio.Future[None]:
        """A future completed ``seconds`` from now, from the backend's thread."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._changed:
            entry = (time.monotonic() + seconds, next(self._order), loop, future)
            heapq.heappush(self._due, entry)
            self._changed.notify()
        return future

    def _run(self) -> None:
        with self._changed:
            while True:
                if not self._due:
                    self._changed.wait()
                    continue
                now = time.monotonic()
                due, _, loop, future = self._due[0]
                if due > now:
                    self._changed.wait(due - now)  # a futex wait: not rounded to milliseconds
                    continue
                heapq.heappop(self._due)
                loop.call_soon_threadsafe(_complete, future)


def _complete(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


_backend: Backend | None = None


async def io_sleep(seconds: float) -> None:
    """``asyncio.sleep``, woken as by a reply on a socket rather than by a loop timer."""
    global _backend
    if _backend is None:
        _backend = Backend()
    await _backend.wait(seconds)


async def io_work(i: int, delay: float) -> dict[str, int]:
    """``benchmarks.clients.work``, waiting on the backend instead of a loop timer."""
    if delay:
        await io_sleep(delay)
    return {"i": i}
