"""Start a coroutine as a task, running its first step right now: Python 3.12's eager tasks.

This back-ports what ``asyncio.eager_task_factory`` (Python 3.12) does for one coroutine: the
first step runs synchronously in the caller, but as the new task (``asyncio.current_task()``
and every cancel scope entered in that step belong to it). A coroutine that finishes in its
first step, such as a tool handler that never awaits, costs no scheduling round trip; one that
suspends carries on in its task and never moves, so its cancel scopes stay valid.

A task object is only consumed when its coroutine suspends: ``EagerStarter`` keeps the unused
one (the *spare*) for the next coroutine, so any number of coroutines that finish in their first
step, one after another, cost one task between them. When the event loop runs an unused spare,
it waits on a future of its own (it is *parked*) for up to ``SPARE_IDLE`` seconds, so batches
that come one after another share it too; a coroutine that suspends in it wakes it to carry on,
and a spare not used meanwhile ends (``close()`` ends it at once). Starts come in
runs (``enter()`` to ``exit()``) in which that task stays the current one from one such
coroutine to the next: the caller's identity is given back once per run, or before the caller
runs code of its own (``resume()``), not after every coroutine.

Each task runs its coroutine inside one anyio cancel scope (given to ``start``'s holder), entered
as the task before the coroutine's first step and exited when the coroutine ends, as a
``with`` block around it would be. Coroutines that finish in their first step share the scope
of the task they share; the one that suspends takes the task and its scope with it. A scope
that was cancelled or given a deadline by a coroutine that then finished is not shared on: the
next coroutine gets a fresh task and scope. So a cancel scope costs what a task costs: once
per coroutine that suspends (or per ``SPARE_IDLE`` seconds), never per batch.

Why private asyncio internals, and only here. Running a step *as* a task that the event loop
is not stepping needs ``asyncio.tasks._enter_task`` and ``_leave_task`` (what the loop itself
calls around each step): there is no public way to share one task, and the cancel scope
entered in it, between coroutines. The public eager start (``asyncio.eager_task_factory``,
``asyncio.Task(..., eager_start=True)``, Python 3.12 and later; nothing on 3.11) makes a task
per coroutine, and each call would then enter an anyio scope of its own, which measured
several times dearer than this start (benchmarks/PROFILE.md, Hot core). The scope is entered
in the spare task before its coroutine exists and exited by the task's carrier when the
coroutine ends, which no ``with`` block can span: so ``CancelScope.__enter__`` and
``__exit__`` are called by hand, in that order, in the task that owns the scope, as a
``with`` block would. Nothing else in livebridge touches these
internals; ``tests/calls/test_eager.py`` checks them on every supported interpreter (the Makefile's
``INTERPRETER_TESTS``). The spare task is built with ``asyncio.Task`` itself, not the loop's
task factory: an eager factory would run the spare's empty first step at once, and it would
finish before any coroutine was given to it.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Protocol

import anyio

_enter_task: Callable[[asyncio.AbstractEventLoop, asyncio.Task[Any]], None]
_leave_task: Callable[[asyncio.AbstractEventLoop, asyncio.Task[Any]], None]
_enter_task = asyncio.tasks._enter_task
_leave_task = asyncio.tasks._leave_task
# The current task is read through the public function: Python 3.14 keeps it per thread, and
# the module's ``_current_tasks`` dict is no longer where it lives.
_current_task = asyncio.current_task
_copy_context = contextvars.copy_context
_NOTHING: Any = object()
#: Seconds an unused spare task waits for a coroutine before it ends (the next start makes
#: another): batches reuse one task and scope, and a dropped starter leaves no task for long.
SPARE_IDLE = 5.0


class _Carrier(Coroutine[Any, Any, Any]):
    """The coroutine of a task: carries on what was started eagerly under the task's identity.

    It forwards every step (``yield from``), each in the started coroutine's own context, and
    exits the task's cancel scope when the coroutine ends (an anyio cancellation of that scope
    ends the task quietly, as leaving a ``with`` block would). A cancellation delivered before
    the task's first step reaches the started coroutine too. Never given a coroutine, it parks (a
    spare waiting to be used), then exits the scope and finishes once woken without one.
    """

    __slots__ = ("context", "coroutine", "park", "scope", "task", "yielded")

    def __init__(self) -> None:
        self.coroutine: Coroutine[Any, Any, Any] | None = None
        self.yielded: Any = _NOTHING
        self.context: contextvars.Context | None = None
        # Both None once the scope was exited: the spare is no spare any more.
        self.scope: anyio.CancelScope | None = None
        self.task: asyncio.Task[Any] | None = None
        #: What an idle spare's task waits on for a coroutine (``SPARE_IDLE`` seconds at most).
        self.park: asyncio.Future[None] | None = None

    def wake(self) -> None:
        """The spare's task steps again: to carry on a coroutine given to it, or to end."""
        park = self.park
        if park is not None and not park.done():
            park.set_result(None)

    def send(self, value: Any) -> Any:
        if self.coroutine is None:
            task = self.task
            if task is not None and self.park is None:  # an idle spare: it waits to be used
                loop = task.get_loop()
                park = self.park = loop.create_future()
                park._asyncio_future_blocking = True  # what ``await park`` would set
                loop.call_later(SPARE_IDLE, _unpark, park)
                return park
            self._leave(None)
            raise StopIteration(None)
        yielded, self.yielded = self.yielded, _NOTHING
        if yielded is not _NOTHING:  # the task's first step: hand over the eager step's yield
            return yielded
        assert self.context is not None
        return self._step(self.coroutine.send, value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        exc = typ if isinstance(typ, BaseException) else typ() if val is None else val
        if self.coroutine is None:
            if self._leave(exc):
                raise StopIteration(None)
            raise exc
        self.yielded = _NOTHING
        return self._step(self.coroutine.throw, exc)

    def _step(self, step: Callable[[Any], Any], value: Any) -> Any:
        assert self.context is not None
        try:
            return self.context.run(step, value)
        except StopIteration:
            self._leave(None)
            raise
        except BaseException as exc:
            if self._leave(exc):
                raise StopIteration(None) from None
            raise

    def _leave(self, exc: BaseException | None) -> bool:
        """Exit the task's scope; True if it swallowed ``exc`` (its own cancellation)."""
        scope, self.scope = self.scope, None
        self.task = None
        if scope is None:
            return False
        if exc is None:
            scope.__exit__(None, None, None)
            return False
        return bool(scope.__exit__(type(exc), exc, exc.__traceback__))

    def close(self) -> None:
        if self.coroutine is not None:
            self.coroutine.close()

    def __await__(self) -> Generator[Any, Any, Any]:
        raise TypeError("a carrier is driven by its task, never awaited")


def _unpark(park: asyncio.Future[None]) -> None:
    if not park.done():
        park.set_result(None)


_NO_SPARE = _Carrier()  # never given a task
_TRACKED: dict[type[anyio.CancelScope], type[anyio.CancelScope]] = {}


def _tracked(base: type[anyio.CancelScope]) -> type[anyio.CancelScope]:
    """``base`` (the running backend's scope class), whose scopes say ``spoiled`` once they were
    cancelled or given a deadline: after each coroutine that finished in its first step, the
    starter tells whether the scope may be shared on by one attribute, not by two of anyio's
    properties (benchmarks/PROFILE.md, the tool core). Made once per backend class."""
    tracked = _TRACKED.get(base)
    if tracked is not None:
        return tracked
    deadline: property = base.deadline  # type: ignore[assignment]

    class Tracked(base):  # type: ignore[misc,valid-type]
        __slots__ = ("spoiled",)  # set False by ``EagerStarter._renew``: no __init__ of its own

        def cancel(self, *args: Any, **kwargs: Any) -> None:
            self.spoiled = True
            super().cancel(*args, **kwargs)

        @property
        def deadline(self) -> float:
            return deadline.__get__(self)  # type: ignore[no-any-return]

        @deadline.setter
        def deadline(self, value: float) -> None:
            self.spoiled = True
            deadline.__set__(self, value)

    _TRACKED[base] = Tracked
    return Tracked


class Scoped(Protocol):
    """What is told the cancel scope its coroutine runs in."""

    scope: anyio.CancelScope | None


class EagerStarter:
    """Starts coroutines eagerly; ``start`` returns the task, or None if it already finished.

    Starts come in runs, between ``enter()`` and ``exit()``. Within a run the starter stays
    the spare task from one coroutine that finished in its first step to the next (the task
    switch is paid once per task, not per coroutine); ``resume()`` makes the caller the
    current task again before the caller runs anything of its own, such as a callback.
    """

    __slots__ = ("_carrier", "_current", "_home", "_loop", "_new_scope", "loop")

    def __init__(self) -> None:
        self.loop = self._loop = asyncio.get_running_loop()
        # The spare task's coroutine; one without a task when there is no spare (none yet,
        # taken by a coroutine that suspended, or run by the loop).
        self._carrier = _NO_SPARE
        # The running backend's scope class, looked up once (``anyio.CancelScope()`` looks
        # the backend up on every construction).
        self._new_scope = _tracked(type(anyio.CancelScope()))
        # The task that called ``enter()``, and the task the starter made current (the same
        # one outside a start, or between starts once ``resume()`` was called).
        self._home: asyncio.Task[Any] | None = None
        self._current: asyncio.Task[Any] | None = None

    def enter(self) -> tuple[asyncio.Task[Any] | None, asyncio.Task[Any] | None]:
        """Begin a run of starts (runs may nest); returns what ``exit`` needs."""
        token = (self._home, self._current)
        self._home = self._current = _current_task(self._loop)
        return token

    def exit(self, token: tuple[asyncio.Task[Any] | None, asyncio.Task[Any] | None]) -> None:
        """End a run of starts: the caller is the current task again."""
        self.resume()
        self._home, self._current = token

    def resume(self) -> None:
        """Make the caller the current task again (until the next start)."""
        if self._current is not self._home:
            self._become(self._home)

    def start(
        self, coroutine: Coroutine[Any, Any, Any], holder: Scoped | None = None
    ) -> asyncio.Task[Any] | None:
        """Run ``coroutine`` up to its first suspension as a task of its own, in its scope.

        ``holder.scope`` is set to that scope before the first step (to cancel the coroutine
        by). Exceptions of that first step propagate to the caller, as from a call.
        """
        carrier = self._carrier
        task = carrier.task
        if task is None:
            carrier, task, _ = self._renew()
        if holder is not None:
            holder.scope = carrier.scope
        if self._current is not task:
            self._become(task)
        context = _copy_context()
        try:
            yielded = context.run(coroutine.send, None)
        except StopIteration:
            scope = carrier.scope
            if scope is not None and scope.spoiled:  # type: ignore[attr-defined]
                self._retire(carrier, None)  # not pristine: the next one gets a fresh scope
            return None  # the spare stays the current task, for the next start
        except BaseException as exc:
            self._retire(carrier, exc)
            self.resume()
            raise
        self.resume()  # the task carries on in the loop
        carrier.coroutine, carrier.yielded, carrier.context = coroutine, yielded, context
        carrier.wake()  # a parked spare steps to take over the yield
        self._carrier = _NO_SPARE
        return task

    def close(self) -> None:
        """Let the spare task end now (it ends by itself after ``SPARE_IDLE`` seconds)."""
        carrier, self._carrier = self._carrier, _NO_SPARE
        if carrier.coroutine is None:  # still a spare: parked, or to end at its first step
            if carrier.park is None:
                carrier.task = None
            carrier.wake()

    def _become(self, task: asyncio.Task[Any] | None) -> None:
        loop = self._loop
        if self._current is not None:
            _leave_task(loop, self._current)
        if task is not None:
            _enter_task(loop, task)
        self._current = task

    def _renew(self) -> tuple[_Carrier, asyncio.Task[Any], anyio.CancelScope]:
        """A new spare task, its scope entered as that task (which stays current)."""
        carrier = _Carrier()
        task = asyncio.Task(carrier, loop=self._loop)  # never eager, whatever the loop's factory
        scope = self._new_scope()
        scope.spoiled = False  # type: ignore[attr-defined]
        self._become(task)
        scope.__enter__()
        carrier.scope, carrier.task = scope, task
        self._carrier = carrier
        return carrier, task, scope

    def _retire(self, carrier: _Carrier, exc: BaseException | None) -> None:
        """Exit the spare's scope now (as its task, which is current) and drop the spare."""
        carrier._leave(exc)
        carrier.wake()  # parked, it ends
        self._carrier = _NO_SPARE
