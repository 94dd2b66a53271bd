"""Start a coroutine as a task, running its first step right now: Python 3.12's eager tasks.

This back-ports what ``asyncio.eager_task_factory`` (Python 3.12) does for one coroutine: the
first step runs synchronously in the caller, but as the new task (``asyncio.current_task()``
and every cancel scope entered in that step belong to it). A coroutine that finishes in its
first step, such as a tool handler that never awaits, costs no scheduling round trip; one that
suspends carries on in its task and never moves, so its cancel scopes stay valid.

A task object is only consumed when its coroutine suspends: ``EagerStarter`` keeps the unused
one for the next coroutine until the event loop runs it, so any number of coroutines that
finish in their first step, one after another, cost one task between them.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine, Generator
from typing import Any

__all__ = ["EagerStarter", "Resumed"]

_enter_task: Callable[[asyncio.AbstractEventLoop, asyncio.Task[Any]], None]
_leave_task: Callable[[asyncio.AbstractEventLoop, asyncio.Task[Any]], None]
_enter_task = asyncio.tasks._enter_task
_leave_task = asyncio.tasks._leave_task
_current_tasks: dict[asyncio.AbstractEventLoop, asyncio.Task[Any]]
_current_tasks = asyncio.tasks._current_tasks  # type: ignore[attr-defined]
_NOTHING: Any = object()


class _Carrier(Coroutine[Any, Any, Any]):
    """The coroutine of a task: carries on what was started eagerly under the task's identity.

    It forwards every step (``yield from``), each in the started coroutine's own context. A
    cancellation delivered before the task's first step reaches the started coroutine too.
    Never given a coroutine, it finishes at once.
    """

    __slots__ = ("context", "coroutine", "yielded")

    def __init__(self) -> None:
        self.coroutine: Coroutine[Any, Any, Any] | None = None
        self.yielded: Any = _NOTHING
        self.context: contextvars.Context | None = None

    def send(self, value: Any) -> Any:
        if self.coroutine is None:
            raise StopIteration(None)
        yielded, self.yielded = self.yielded, _NOTHING
        if yielded is not _NOTHING:  # the task's first step: hand over the eager step's yield
            return yielded
        assert self.context is not None
        return self.context.run(self.coroutine.send, value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        exc = typ if isinstance(typ, BaseException) else typ() if val is None else val
        if self.coroutine is None:
            raise exc
        self.yielded = _NOTHING
        assert self.context is not None
        return self.context.run(self.coroutine.throw, exc)

    def close(self) -> None:
        if self.coroutine is not None:
            self.coroutine.close()

    def __await__(self) -> Generator[Any, Any, Any]:
        raise TypeError("a carrier is driven by its task, never awaited")


class EagerStarter:
    """Starts coroutines eagerly; ``start`` returns the task, or None if it already finished."""

    __slots__ = ("_carrier", "_loop", "_spare", "loop")

    def __init__(self) -> None:
        self.loop = self._loop = asyncio.get_running_loop()
        self._spare: asyncio.Task[Any] | None = None
        self._carrier: _Carrier | None = None

    def start(self, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task[Any] | None:
        """Run ``coroutine`` up to its first suspension as a task of its own.

        Exceptions of that first step propagate to the caller, as they would from a call.
        """
        loop = self._loop
        if self._spare is None or self._spare.done():  # the spare ran its step: it is gone
            self._carrier = _Carrier()
            self._spare = loop.create_task(self._carrier)
        task, carrier = self._spare, self._carrier
        assert carrier is not None
        context = contextvars.copy_context()
        caller = _current_tasks.get(loop)
        if caller is not None:
            _leave_task(loop, caller)
        _enter_task(loop, task)
        try:
            yielded = context.run(coroutine.send, None)
        except StopIteration:
            return None
        finally:
            _leave_task(loop, task)
            if caller is not None:
                _enter_task(loop, caller)
        carrier.coroutine, carrier.yielded, carrier.context = coroutine, yielded, context
        self._spare = self._carrier = None
        return task


class Resumed:
    """Awaiting it carries on, in the awaiting task, a coroutine already stepped once by hand.

    It does what ``await`` would have done from there on (``yield from``): what the coroutine
    yields goes to the task, what the task sends or throws goes to the coroutine.
    """

    __slots__ = ("_coroutine", "_yielded")

    def __init__(self, coroutine: Coroutine[Any, Any, Any], yielded: Any) -> None:
        self._coroutine = coroutine
        self._yielded = yielded

    def __await__(self) -> Generator[Any, Any, Any]:
        coroutine, yielded = self._coroutine, self._yielded
        while True:
            try:
                sent = yield yielded
            except GeneratorExit:
                coroutine.close()
                raise
            except BaseException as exc:
                try:
                    yielded = coroutine.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    yielded = coroutine.send(sent)
                except StopIteration as done:
                    return done.value
