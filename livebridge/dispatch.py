"""Run a batch of calls under limits, timeouts and cancel scopes, and answer each exactly once.

The dispatcher knows nothing of any wire format: ``Call``s in, ``Outcome``s out (one per call,
same order), each response following the contract table in DESIGN.md. Planning a batch is
synchronous (re-issues, fan-out, unknown names, argument validation, duplicates). Each call that
must run gets its own cancel scope and starts inline; the first one that suspends carries on in
the caller's task and each call after it gets a task (see ``_run_concurrently``).

Bad input to ``run()`` (something that is not a ``Call``, an id that is not a non-empty string)
raises ``ValueError`` before anything runs, because such a call could never be answered. A name
that is not a string, with a usable id, is answered as an ``unknown_function`` rejection.
"""

from __future__ import annotations

import contextvars
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Generator, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
import msgspec

from livebridge import payloads
from livebridge.calls import Call, CallContext, Outcome, OutcomeKind, Partial, Result, Scheduling
from livebridge.errors import InvalidCallError, ToolError
from livebridge.observe import BatchSettled, BatchStarted, CallSettled, CallStarted, Observer, emit
from livebridge.tools import Tool, ToolRegistry

log = logging.getLogger("livebridge.dispatch")

OnSettled = Callable[[Outcome], None]
OnPartial = Callable[[Partial], None]
Job = Callable[[], Coroutine[Any, Any, None]]

_canonical = msgspec.json.Encoder(order="sorted").encode
_NO_VALUE: Any = object()
_STREAM_END: Any = object()


@dataclass(frozen=True, slots=True)
class CallPolicy:
    """Limits for one dispatcher (one session).

    ``limiter`` may be shared by many dispatchers so that all sessions of a process together
    keep within what one backend can take. ``dedup_window`` is how long (seconds) an identical
    call of a non-idempotent tool is answered from the first one instead of running again.
    """

    max_parallel: int = 8
    max_calls_per_turn: int = 16
    timeout: float = 30.0
    max_result_bytes: int = 65_536
    dedup_window: float = 30.0
    limiter: anyio.CapacityLimiter | None = None

    def __post_init__(self) -> None:
        if self.max_parallel < 1 or self.max_calls_per_turn < 1:
            raise ValueError("max_parallel and max_calls_per_turn must be at least 1")
        if not self.timeout > 0:
            raise ValueError("timeout must be positive")
        if self.max_result_bytes < 128:
            raise ValueError("max_result_bytes must be at least 128")
        if self.dedup_window < 0:
            raise ValueError("dedup_window must not be negative")


class _Pending:
    """A call in flight: its cancel scope, and its outcome once settled.

    The scope gets its ``deadline`` only once the call first suspends: until then no timeout
    can fire, and a handler that finishes without suspending never arms a timer.
    """

    __slots__ = ("call", "cancel_requested", "deadline", "outcome", "scope", "settled")

    def __init__(self, call: Call, scope: anyio.CancelScope, deadline: float = math.inf) -> None:
        self.call = call
        self.scope = scope
        self.deadline = deadline
        self.outcome: Outcome | None = None
        self.settled: anyio.Event | None = None
        self.cancel_requested = False

    def finish(self, outcome: Outcome) -> None:
        self.outcome = outcome
        if self.settled is not None:
            self.settled.set()

    async def wait(self) -> Outcome:
        if self.outcome is None:
            if self.settled is None:
                self.settled = anyio.Event()
            await self.settled.wait()
        assert self.outcome is not None
        return self.outcome


@dataclass(frozen=True, slots=True)
class _Recent:
    first: _Pending
    started_at: float


class Dispatcher:
    """Runs batches of calls against a registry; one per session.

    Remembers the last ``ledger_size`` answered call ids, so a re-issued id gets its answer
    again without the handler running twice.
    """

    def __init__(
        self,
        tools: ToolRegistry,
        policy: CallPolicy | None = None,
        observers: Iterable[Observer] = (),
        session_id: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        ledger_size: int = 4096,
    ) -> None:
        self.tools = tools
        self.policy = policy = policy or CallPolicy()
        self.session_id = session_id
        self._observers = tuple(observers)
        self._clock = clock
        self._limiter = anyio.CapacityLimiter(policy.max_parallel)
        self._ledger_size = ledger_size
        self._answered: OrderedDict[str, Outcome] = OrderedDict()
        self._running: dict[str, _Pending] = {}
        self._recent: OrderedDict[tuple[str, bytes], _Recent] = OrderedDict()
        self._limiters_by_tool: dict[str, tuple[anyio.CapacityLimiter, ...]] = {}

    def cancel(self, call_id: str) -> bool:
        """Cancel a call in flight; its outcome becomes ``cancelled``. False if none is running."""
        pending = self._running.get(call_id)
        if pending is None or pending.outcome is not None:
            return False
        pending.cancel_requested = True
        pending.scope.cancel()
        return True

    def answered(self, call_id: str) -> Outcome | None:
        """The remembered outcome of an earlier call id, if any."""
        return self._answered.get(call_id)

    async def run(
        self,
        calls: Sequence[Call],
        *,
        turn: int = 0,
        on_settled: OnSettled | None = None,
        on_partial: OnPartial | None = None,
    ) -> list[Outcome]:
        """Answer every call; returns one ``Outcome`` per call, in the order given.

        ``on_settled`` runs synchronously as each call settles; ``on_partial`` receives each
        item an async-generator handler yields (without it, the items are collected into one
        ``{"output": [...]}``).
        """
        if not calls:
            return []
        _check(calls)
        batch = _Batch(self, calls, turn, on_settled, on_partial)
        if self._observers:
            emit(self._observers, BatchStarted(self.session_id, turn, len(calls)))
        jobs = batch.plan()
        if len(jobs) == 1:
            await jobs[0]()
        elif jobs:
            await _run_concurrently(jobs)
        if self._observers:
            duration = self._clock() - batch.received
            emit(self._observers, BatchSettled(self.session_id, turn, len(calls), duration))
        return batch.outcomes()

    # -- shared state ---------------------------------------------------------------------

    def _remember(self, outcome: Outcome) -> None:
        answered = self._answered
        answered[outcome.call_id] = outcome
        if len(answered) > self._ledger_size:
            answered.popitem(last=False)

    def _recent_twin(self, key: tuple[str, bytes], now: float) -> _Pending | None:
        recent = self._recent
        window = self.policy.dedup_window
        while recent:
            oldest = next(iter(recent.values()))
            if now - oldest.started_at < window and len(recent) <= self._ledger_size:
                break
            recent.popitem(last=False)
        entry = recent.get(key)
        return entry.first if entry is not None else None

    def _limiters(self, tool: Tool) -> tuple[anyio.CapacityLimiter, ...]:
        """Per-tool, then process-wide, then this dispatcher's: always acquired in that order."""
        limiters = self._limiters_by_tool.get(tool.name)
        if limiters is None:
            candidates = (tool.limiter, self.policy.limiter, self._limiter)
            limiters = tuple(x for x in candidates if x is not None)
            self._limiters_by_tool[tool.name] = limiters
        return limiters

    # -- outcomes -------------------------------------------------------------------------

    async def _invoke(
        self, pending: _Pending, tool: Tool, kwargs: dict[str, Any], batch: _Batch
    ) -> Outcome:
        """Run one handler under its limits and scope, and turn what happened into an Outcome."""
        call = pending.call
        value: Any = _NO_VALUE
        failure: Exception | None = None
        started = ended = 0.0
        scope = pending.scope
        with scope:
            acquired: list[anyio.CapacityLimiter] = []
            try:
                for limiter in self._limiters(tool):
                    try:
                        limiter.acquire_on_behalf_of_nowait(pending)
                    except anyio.WouldBlock:
                        scope.deadline = pending.deadline
                        await limiter.acquire_on_behalf_of(pending)
                    acquired.append(limiter)
                started = self._clock()
                if self._observers:
                    event = CallStarted(self.session_id, batch.turn, call, tool.behavior, started)
                    emit(self._observers, event)
                if tool.kind == "async":
                    coroutine = tool.handler(**kwargs)
                    try:
                        yielded = coroutine.send(None)
                    except StopIteration as done:
                        value = done.value
                    else:
                        scope.deadline = pending.deadline
                        value = await _Resumed(coroutine, yielded)
                else:
                    scope.deadline = pending.deadline
                    if tool.kind == "sync":
                        function = partial(tool.handler, **kwargs)
                        value = await anyio.to_thread.run_sync(function, abandon_on_cancel=True)
                    else:
                        value = await self._stream(call, tool, kwargs, batch.on_partial)
            except Exception as exc:
                failure = exc
            finally:
                for limiter in reversed(acquired):
                    limiter.release_on_behalf_of(pending)
                ended = self._clock()
        latency = ended - started if started else 0.0
        if value is _NO_VALUE and pending.scope.cancel_called:
            if pending.cancel_requested:
                return _cancelled(call, latency)
            timeout = tool.timeout or self.policy.timeout
            message = f"{tool.name} did not finish within {timeout:g} s."
            response = payloads.error("timeout", message, retryable=True)
            return _outcome(call, "timeout", response, latency=latency, scheduling=tool.scheduling)
        if failure is not None:
            return _failure(call, tool, failure, latency)
        return self._success(call, tool, value, latency)

    async def _stream(
        self, call: Call, tool: Tool, kwargs: dict[str, Any], on_partial: OnPartial | None
    ) -> Any:
        items: list[Any] = []
        stream = tool.handler(**kwargs)
        try:
            async for item in stream:
                if on_partial is None:
                    items.append(item.value if isinstance(item, Result) else item)
                    continue
                value, scheduling = _unwrap(item, tool.scheduling)
                payload = payloads.output(value, self.policy.max_result_bytes)
                _deliver(on_partial, Partial(call.id, tool.name, payload.response, scheduling))
        finally:
            await stream.aclose()
        return items if on_partial is None else _STREAM_END

    def _success(self, call: Call, tool: Tool, value: Any, latency: float) -> Outcome:
        value, scheduling = _unwrap(value, tool.scheduling)
        if value is _STREAM_END:
            return Outcome(call.id, tool.name, "ok", {}, latency, 2, scheduling=scheduling)
        try:
            payload = payloads.output(value, self.policy.max_result_bytes)
        except payloads.UnserializableResult as exc:
            return _failure(call, tool, exc, latency)
        return Outcome(
            call.id,
            tool.name,
            "ok",
            payload.response,
            latency,
            payload.result_bytes,
            payload.truncated,
            payload.original_bytes,
            scheduling=scheduling,
        )


class _Batch:
    """One ``run()``: planning each call, then settling it exactly once."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        calls: Sequence[Call],
        turn: int,
        on_settled: OnSettled | None,
        on_partial: OnPartial | None,
    ) -> None:
        self.dispatcher = dispatcher
        self.calls = calls
        self.turn = turn
        self.on_settled = on_settled
        self.on_partial = on_partial
        self.received = dispatcher._clock()
        # The running backend's scope class: creating scopes through it skips a backend lookup.
        self.new_scope: type[anyio.CancelScope] = type(anyio.CancelScope())
        self._outcomes: list[Outcome | None] = [None] * len(calls)

    def outcomes(self) -> list[Outcome]:
        done = self._outcomes
        assert all(o is not None for o in done), "every call settles before run() returns"
        return done  # type: ignore[return-value]

    def settle(self, index: int, outcome: Outcome, tool: Tool | None) -> None:
        self._outcomes[index] = outcome
        dispatcher = self.dispatcher
        dispatcher._remember(outcome)
        if dispatcher._observers:
            call = self.calls[index]
            behavior = tool.behavior if tool is not None else "BLOCKING"
            event = CallSettled(
                dispatcher.session_id,
                self.turn,
                call,
                behavior,
                outcome,
                self.received,
                tool is not None,
            )
            emit(dispatcher._observers, event)
        if self.on_settled is not None:
            _deliver(self.on_settled, outcome)

    def plan(self) -> list[Callable[[], Coroutine[Any, Any, None]]]:
        """Settle what can be answered now; return a job for each call that must wait or run."""
        dispatcher = self.dispatcher
        policy = dispatcher.policy
        tools = dispatcher.tools
        running = dispatcher._running
        firsts: dict[tuple[str, bytes], _Pending] = {}
        jobs: list[Callable[[], Coroutine[Any, Any, None]]] = []
        now = anyio.current_time()
        for index, call in enumerate(self.calls):
            tool = tools.get(call.name) if isinstance(call.name, str) else None
            same_id = running.get(call.id)
            if same_id is not None:
                jobs.append(partial(self._reissue, index, tool, same_id))
                continue
            earlier = dispatcher._answered.get(call.id)
            if earlier is not None:
                dispatcher._answered.move_to_end(call.id)
                self.settle(index, earlier, tool)
                continue
            if index >= policy.max_calls_per_turn:
                self.settle(index, _fanout(call, policy.max_calls_per_turn), tool)
                continue
            if tool is None:
                self.settle(index, _unknown(call, tools.names()), None)
                continue
            try:
                arguments = tool.convert_arguments(call.args)
            except (msgspec.ValidationError, RecursionError) as exc:
                response = payloads.error("invalid_arguments", str(exc))
                self.settle(index, _outcome(call, "rejected", response), tool)
                continue
            if len(self.calls) > 1 or (not tool.idempotent and policy.dedup_window > 0):
                key = (tool.name, _canonical_arguments(arguments))
                first = firsts.get(key)
                if first is not None:
                    if tool.idempotent:
                        jobs.append(self._waiter(index, tool, first, None))
                    else:
                        self.settle(index, _twin(call, first.call.id), tool)
                    continue
                if not tool.idempotent and policy.dedup_window > 0:
                    earlier_run = dispatcher._recent_twin(key, self.received)
                    if earlier_run is not None:
                        jobs.append(self._waiter(index, tool, earlier_run, "duplicate"))
                        continue
            else:
                key = None
            timeout = tool.timeout or policy.timeout
            pending = _Pending(call, self.new_scope(), now + timeout)
            running[call.id] = pending
            if key is not None:
                firsts[key] = pending
                if not tool.idempotent and policy.dedup_window > 0:
                    dispatcher._recent[key] = _Recent(pending, self.received)
            jobs.append(partial(self._execute, index, pending, tool, arguments))
        return jobs

    async def _execute(
        self, index: int, pending: _Pending, tool: Tool, arguments: msgspec.Struct
    ) -> None:
        call = pending.call
        dispatcher = self.dispatcher
        kwargs = msgspec.structs.asdict(arguments)
        if tool.context_parameter is not None:
            context = CallContext(call.id, tool.name, self.turn, dispatcher.session_id)
            kwargs[tool.context_parameter] = context
        outcome: Outcome | None = None
        try:
            outcome = await dispatcher._invoke(pending, tool, kwargs, self)
        finally:
            del dispatcher._running[call.id]
            pending.finish(outcome or _cancelled(call, 0.0))
        self.settle(index, outcome, tool)

    def _waiter(
        self, index: int, tool: Tool, first: _Pending, kind: OutcomeKind | None
    ) -> Callable[[], Coroutine[Any, Any, None]]:
        """A job answering a twin from ``first``'s outcome, cancellable by the twin's own id."""
        own = _Pending(self.calls[index], self.new_scope())
        self.dispatcher._running[own.call.id] = own
        return partial(self._wait, index, tool, own, first, kind)

    async def _wait(
        self, index: int, tool: Tool, own: _Pending, first: _Pending, kind: OutcomeKind | None
    ) -> None:
        call = own.call
        outcome: Outcome | None = None
        try:
            with own.scope:
                outcome = _copy(call, await first.wait(), kind)
        finally:
            del self.dispatcher._running[call.id]
            outcome = outcome or _cancelled(call, 0.0)
            own.finish(outcome)
        self.settle(index, outcome, tool)

    async def _reissue(self, index: int, tool: Tool | None, first: _Pending) -> None:
        """A call id that is still running elsewhere gets that very outcome."""
        self.settle(index, await first.wait(), tool)


async def _run_concurrently(jobs: Sequence[Job]) -> None:
    """Run ``jobs`` concurrently, starting each inline in this task until one suspends.

    A job that finishes without suspending needs no task. The first one that suspends carries on
    in this task, and every job after it gets a task of its own; none is ever moved between
    tasks, so cancel scopes and limiters stay with the task that entered them. Each job runs in
    its own copy of the context, as it would in a task.
    """
    async with anyio.create_task_group() as tg:
        for position, job in enumerate(jobs):
            context = contextvars.copy_context()
            coroutine = job()
            try:
                yielded = context.run(coroutine.send, None)
            except StopIteration:
                continue
            for later in jobs[position + 1 :]:
                tg.start_soon(later)
            await _Resumed(coroutine, yielded, context)
            return


class _Resumed:
    """Awaiting it carries on a coroutine that already ran up to its first suspension.

    It does what ``await`` would have done from there on (``yield from``): what the coroutine
    yields goes to the task, what the task sends or throws goes to the coroutine. Given a
    context, every step runs in it.
    """

    __slots__ = ("_context", "_coroutine", "_yielded")

    def __init__(
        self,
        coroutine: Coroutine[Any, Any, Any],
        yielded: Any,
        context: contextvars.Context | None = None,
    ) -> None:
        self._coroutine = coroutine
        self._yielded = yielded
        self._context = context

    def __await__(self) -> Generator[Any, Any, Any]:
        coroutine, yielded = self._coroutine, self._yielded
        run = self._context.run if self._context is not None else _call
        while True:
            try:
                sent = yield yielded
            except GeneratorExit:
                coroutine.close()
                raise
            except BaseException as exc:
                try:
                    yielded = run(coroutine.throw, exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    yielded = run(coroutine.send, sent)
                except StopIteration as done:
                    return done.value


def _call(function: Callable[[Any], Any], argument: Any) -> Any:
    return function(argument)


def _check(calls: Sequence[Call]) -> None:
    for position, call in enumerate(calls):
        if not isinstance(call, Call):
            raise InvalidCallError(
                f"calls[{position}] is a {type(call).__name__}, not a livebridge.Call"
            )
        if not isinstance(call.id, str) or not call.id:
            raise InvalidCallError(
                f"calls[{position}] ({call.name!r}) needs a non-empty string id, not {call.id!r}"
            )


def _canonical_arguments(arguments: msgspec.Struct) -> bytes:
    try:
        return _canonical(arguments)
    except (TypeError, ValueError, OverflowError, RecursionError):
        return repr(arguments).encode()


def _unwrap(value: Any, default: Scheduling | None) -> tuple[Any, Scheduling | None]:
    if isinstance(value, Result):
        return value.value, value.scheduling or default
    return value, default


def _deliver(callback: Callable[[Any], None], item: Any) -> None:
    try:
        callback(item)
    except Exception:
        log.exception("callback %r failed on %r", callback, item)


def _outcome(
    call: Call,
    kind: OutcomeKind,
    response: dict[str, Any],
    *,
    latency: float = 0.0,
    scheduling: Scheduling | None = None,
) -> Outcome:
    name = call.name if isinstance(call.name, str) else repr(call.name)
    size = payloads.encoded_size(response)
    return Outcome(call.id, name, kind, response, latency, size, scheduling=scheduling)


def _copy(call: Call, original: Outcome, kind: OutcomeKind | None) -> Outcome:
    """``original``'s answer for another call id; a withdrawn original is an error for the copy."""
    if kind is None:
        kind = "error" if original.kind == "cancelled" else original.kind
    return msgspec.structs.replace(
        original, call_id=call.id, kind=kind, duplicate_of=original.call_id
    )


def _failure(call: Call, tool: Tool, exc: Exception, latency: float) -> Outcome:
    if isinstance(exc, ToolError):
        response = payloads.error("tool_error", exc.message, retryable=exc.retryable)
    elif isinstance(exc, payloads.UnserializableResult):
        log.error(
            "tool %s (call %s) returned an unserializable result: %s", tool.name, call.id, exc
        )
        message = f"The tool's result cannot be encoded as JSON ({exc})."
        response = payloads.error("unserializable_result", message, retryable=False)
    else:
        log.error("tool %s (call %s) raised", tool.name, call.id, exc_info=exc)
        kind = type(exc).__name__
        if tool.expose_errors:
            message = str(exc) or kind
        else:
            message = f"The tool raised {kind}; details are in the server log."
        response = payloads.error(kind, message, retryable=False)
    return _outcome(call, "error", response, latency=latency, scheduling=tool.scheduling)


def _cancelled(call: Call, latency: float) -> Outcome:
    response = payloads.error("cancelled", "The call was cancelled.", retryable=True)
    return _outcome(call, "cancelled", response, latency=latency)


def _fanout(call: Call, limit: int) -> Outcome:
    message = f"Too many calls in one turn: only the first {limit} run. Issue this one again later."
    return _outcome(call, "rejected", payloads.error("fanout_limit", message, retryable=True))


def _unknown(call: Call, available: list[str]) -> Outcome:
    what = f"{call.name!r}" if isinstance(call.name, str) else f"name {call.name!r} (not a string)"
    message = f"Unknown function {what}; available: {', '.join(available) or '(none)'}"
    return _outcome(call, "rejected", payloads.error("unknown_function", message))


def _twin(call: Call, first_id: str) -> Outcome:
    message = f"Identical to call {first_id} in the same turn, which runs once; see its answer."
    response = payloads.error("duplicate_call", message, duplicate_of=first_id)
    outcome = _outcome(call, "duplicate", response)
    return msgspec.structs.replace(outcome, duplicate_of=first_id)
