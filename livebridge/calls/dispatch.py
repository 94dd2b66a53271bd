"""Run a batch of calls under limits, timeouts and cancel scopes, and answer each exactly once.

The dispatcher knows nothing of any wire format: ``Call``s in, ``Outcome``s out (one per call,
same order), each response following the contract table (docs/contract.md). Planning a call is
synchronous and returns one ``Plan``: settle it now, run it, wait for another call's answer
(a twin, a re-issue, the same idempotency key) or rejoin the same id running elsewhere.

Each call that runs or waits is started eagerly (``livebridge.calls.eager``): one that finishes
without suspending needs no task; one that suspends carries on in a task of its own, so that
``run()`` returns once every call of the batch has its outcome, even if a handler that
ignored its cancellation is still running (it is *abandoned*: answered ``timeout``, tracked,
and it keeps its concurrency slots until it really ends; ``aclose()`` reaps what is left).

Every call ``run()`` planned is settled exactly once (``on_settled`` and observers), also when
``run()`` itself is cancelled: the calls still running are then cancelled and settled
``cancelled`` at once.

``submit()`` is the same path for one call at a time (a framework that runs each tool call
on its own): calls submitted under the same ``turn`` share twins and the fan-out limit as one
batch's calls do; limits, re-issues, idempotency keys and observers are the dispatcher's. An
integration that knows whether an answer reached the model says so with ``report()``.

Bad input to ``run()`` (something that is not a ``Call``, an id that is not a non-empty string)
raises ``InvalidCallError`` before anything runs, because such a call could never be answered.
Anything wrong with one call's name or arguments is that call's answer, never an exception.
"""

from __future__ import annotations

import asyncio
import logging
import math
import operator
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Hashable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, assert_never

import anyio
import msgspec

from livebridge.calls import approval, outcomes, plans, returns
from livebridge.calls.answered import Answers
from livebridge.calls.call import (
    Call,
    CallContext,
    DedupReason,
    Outcome,
    Partial,
)
from livebridge.calls.confirm import TurnGate
from livebridge.calls.eager import EagerStarter
from livebridge.calls.endings import FAILURES, OutcomeKind, is_failure
from livebridge.calls.keys import RequestKeys
from livebridge.calls.lingering import reap
from livebridge.calls.observers import (
    BatchSettled,
    BatchStarted,
    CallSettled,
    CallStarted,
    Observer,
    emit,
)
from livebridge.calls.plans import Batch, Pending, Plan, Rejoin, Run, Settle, Wait, check_calls
from livebridge.calls.policy import CallPolicy
from livebridge.calls.repeats import Request, Requests, served_by_key
from livebridge.calls.sync_handlers import LocalSlots, SlotLimiter, ThreadSlots, acquire_each
from livebridge.calls.tools import Tool, ToolRegistry

if TYPE_CHECKING:
    from livebridge.calls.journaled import CallJournal, Ticket

log = logging.getLogger("livebridge.calls.dispatch")

OnSettled = Callable[[Outcome], None]
OnPartial = Callable[[Partial], None]
ABANDON_GRACE = plans.ABANDON_GRACE

_canonical = msgspec.json.Encoder(order="sorted").encode
_asdict = msgspec.structs.asdict
_convert = msgspec.convert
#: Is a remembered request settled? Its first call's outcome, if any (an Outcome is truthy).
_has_outcome = operator.attrgetter("first.outcome")


def _failed(request: Request[Pending]) -> bool:
    """A request whose first call failed: a retry of it keeps its idempotency key."""
    outcome = request.first.outcome
    return outcome is not None and outcome.kind in FAILURES  # ``is_failure``, inline


#: How many turns ``submit()`` remembers (for twins and the fan-out limit).
_TURNS_KEPT = 64


class _Turn:
    """The calls ``submit()`` has seen of one turn: each request's first, and how many."""

    __slots__ = ("count", "firsts")

    def __init__(self) -> None:
        self.firsts: dict[Hashable, Pending] = {}
        self.count = 0


class Dispatcher:
    """Runs batches of calls against a registry; one per session.

    Remembers the last ``ledger_size`` answered call ids (a re-delivered id is not run again:
    it gets its answer again while that is kept within ``policy.remembered_bytes``, else
    ``already_answered``; ``livebridge.calls.answered``) and as many earlier requests, to tell
    a re-issue from a new request. ``answer_seen(call_id)`` says whether the model could have
    seen that call's answer; a session passes ``CallLedger.answer_seen``. The default (no
    connection to know about, as with the non-streaming APIs) takes every settled answer as
    seen. ``journal`` (a session with a store, ``livebridge.store.journal``) is asked before a
    call runs.
    """

    def __init__(
        self,
        tools: ToolRegistry,
        policy: CallPolicy | None = None,
        observers: Iterable[Observer] = (),
        session_id: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        ledger_size: int = 4096,
        answer_seen: Callable[[str], bool] | None = None,
        journal: CallJournal | None = None,
    ) -> None:
        self.tools = tools
        self._journal = journal
        self.policy = policy = policy or CallPolicy()
        self.session_id = session_id
        self._observers = tuple(observers)
        self._clock = clock
        self._answer_seen = answer_seen or (lambda call_id: True)
        # Is a request decided (a repeat is new, ``classify``)? All seen: once it has an outcome.
        self._is_decided = self._decided if answer_seen else _has_outcome
        self._limiter = LocalSlots(policy.max_parallel)
        # A tool without a limiter of its own, under a policy without one, takes only this
        # dispatcher's slot: inline (``_execute``), as ``_own``.
        self._own: tuple[SlotLimiter, ...] = (self._limiter,)
        self._own_only = policy.limiter is None
        self._max_result_bytes = policy.max_result_bytes
        # Worker threads for sync handlers: their own pool, not anyio's process-wide default.
        self._threads = anyio.CapacityLimiter(policy.max_parallel)
        self._answered = Answers(ledger_size, policy.remembered_bytes)
        self._answer_of = self._answered.get
        # ``tools.get`` as the registry's own dict look-up, bound (it sees tools added or
        # removed later): one Python call fewer for every call.
        self._tool_of = tools._tools.get
        self._running: dict[str, Pending] = {}
        self._requests: Requests[Pending] = Requests(ledger_size, self._is_decided, _failed)
        self._keyed: Requests[Pending] = Requests(policy.idempotency_cache)
        self._request_of = self._requests.get
        self._keys = RequestKeys(journal.conversation if journal else None, ledger_size)
        self._limiters_by_tool: dict[str, tuple[SlotLimiter, ...]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._starter: EagerStarter | None = None
        self._gate = TurnGate()  # irreversible calls waiting for their turn (``confirm``)
        self._loop_time: Callable[[], float] = time.monotonic
        self._ledger_size = ledger_size
        self._turns: OrderedDict[int, _Turn] = OrderedDict()  # ``submit()``'s recent turns
        self._unsent: OrderedDict[str, None] | None = None  # ``report()``: answers not seen

    def cancel(self, call_id: str) -> bool:
        """Cancel a call in flight; its outcome becomes ``cancelled``. False if none is running."""
        pending = self._running.get(call_id)
        if pending is None or pending.outcome is not None:
            return False
        pending.cancel_requested = True
        if pending.scope is not None:  # else it has not started, and will not run
            pending.scope.cancel()
        return True

    def confirm(self, call_ids: Iterable[str], withdrawn: str | None = None) -> None:
        """The model's turn that issued these calls is confirmed, or ``withdrawn`` (why): an
        irreversible call held for it starts now, or ends ``cancelled`` without running."""
        self._gate.decide(call_ids, withdrawn)

    def report(self, call_id: str, *, sent: bool) -> None:
        """Say whether a call's answer reached the model: ``sent`` False (lost with the
        connection, never sent) makes an identical call a re-issue, answered from this one
        without running again; True makes it a new request. A call submitted with
        ``reported=True`` counts as unseen until it is reported sent."""
        unsent = self._track()
        if sent:
            unsent.pop(call_id, None)
        else:
            unsent[call_id] = None
            if len(unsent) > self._ledger_size:
                unsent.popitem(last=False)

    def _track(self) -> OrderedDict[str, None]:
        """From now on a settled answer counts as seen only once reported sent (or, for a call
        never submitted with ``reported``, unless reported lost)."""
        unsent = self._unsent
        if unsent is None:
            unsent = self._unsent = OrderedDict()
            seen = self._answer_seen
            self._answer_seen = lambda call_id: call_id not in unsent and seen(call_id)
            self._is_decided = self._requests.stale = self._decided
        return unsent

    def answered(self, call_id: str) -> Outcome | None:
        """The remembered outcome of an earlier call id, if its payload is still kept."""
        earlier = self._answered.get(call_id)
        return None if isinstance(earlier, str) else earlier

    @property
    def remembered_bytes(self) -> int:
        """Bytes charged now for the answers kept to answer a re-delivered id again."""
        return self._answered.used

    @property
    def lingering(self) -> int:
        """Handler tasks still running, abandoned ones included (``aclose()`` reaps them)."""
        return len(self._tasks)

    async def aclose(self, grace: float = 5.0) -> int:
        """Give running handlers ``grace`` seconds, then cancel them; returns how many are left.

        Those left ignored their cancellation; they are logged and keep their slots.
        """
        if self._starter is not None:
            self._starter.close()
        return await reap(self._tasks, grace)

    async def run(
        self,
        calls: Sequence[Call],
        *,
        turn: int = 0,
        on_settled: OnSettled | None = None,
        on_partial: OnPartial | None = None,
        refuse: bool = False,
        confirmed: bool = True,
    ) -> list[Outcome]:
        """Answer every call; returns one ``Outcome`` per call, in the order given.

        ``on_settled`` runs synchronously as each call settles; ``on_partial`` receives each
        item an async-generator handler yields (without it, the items are collected into one
        ``{"output": [...]}``). ``refuse``: the owner is shutting down; a call not answered
        before is answered ``session_closing`` (retryable) without running. ``confirmed``
        False: the model's turn that issued them may still be withdrawn; an irreversible tool's
        call waits for ``confirm()`` or ``CallPolicy.confirm_window`` seconds of silence.
        """
        started = self.start(
            calls,
            turn=turn,
            on_settled=on_settled,
            on_partial=on_partial,
            refuse=refuse,
            confirmed=confirmed,
        )
        return started if isinstance(started, list) else await started

    def start(
        self,
        calls: Sequence[Call],
        *,
        turn: int = 0,
        on_settled: OnSettled | None = None,
        on_partial: OnPartial | None = None,
        refuse: bool = False,
        confirmed: bool = True,
    ) -> list[Outcome] | Coroutine[Any, Any, list[Outcome]]:
        """``run()`` starting every call now: the outcomes if all settled at once (no task to
        wait in), else a coroutine to await exactly once (cancelled, it cancels what runs)."""
        if not calls:
            return []
        check_calls(calls)
        batch = Batch(calls, turn, on_settled, on_partial, self._clock(), refuse, confirmed)
        if self._observers:
            emit(self._observers, BatchStarted(self.session_id, turn, len(calls)))
        starter = self._starter
        if starter is None or starter.loop is not asyncio.get_running_loop():
            starter = self._starter = EagerStarter()
            # Looked up once per event loop: the clock cancel-scope deadlines are measured on.
            self._loop_time = starter.loop.time
        plans = self._plan(batch)
        token = starter.enter()
        try:
            try:
                self._start_each(batch, plans, starter)
            finally:
                starter.exit(token)
        except BaseException:  # a handler's first step raised past its call: settle them all
            self._withdraw(batch)
            raise
        return self._rest(batch) if batch.left else self._finished(batch)

    async def submit(
        self,
        call: Call,
        *,
        turn: int | None = None,
        on_partial: OnPartial | None = None,
        confirmed: bool = True,
        reported: bool = False,
    ) -> Outcome:
        """Answer one call; returns its one ``Outcome`` (the batch path's, call by call).

        Calls submitted with the same ``turn`` (issued by one model response) are one turn's:
        an identical second call is its twin, and those past ``max_calls_per_turn`` are
        refused. ``turn`` None: the call is a turn of its own. The last 64 turns are kept.
        ``reported``: its answer counts as unseen until ``report(call.id, sent=True)``, so an
        identical call before then is a re-issue and gets this answer. Cancelled, the call is
        cancelled and settled ``cancelled``.
        """
        check_calls((call,))
        if reported:
            self._track()[call.id] = None
        if turn is None:
            firsts: dict[Hashable, Pending] = {}
            position = 0
        else:
            shared = self._turns.pop(turn, None) or _Turn()
            self._turns[turn] = shared  # the newest at the end
            if len(self._turns) > _TURNS_KEPT:
                self._turns.popitem(last=False)
            firsts, position = shared.firsts, shared.count
            shared.count += 1
        batch = Batch((call,), turn or 0, None, on_partial, self._clock(), False, confirmed)
        starter = self._starter
        if starter is None or starter.loop is not asyncio.get_running_loop():
            starter = self._starter = EagerStarter()
            self._loop_time = starter.loop.time
        plan = self._plan_one(batch, firsts, self._loop_time(), position, call)
        token = starter.enter()
        try:
            try:
                self._start_each(batch, [plan], starter)
            finally:
                starter.exit(token)
        except BaseException:
            self._withdraw(batch)
            raise
        try:  # a batch of one, but no batch events: a turn's calls arrive one by one
            if batch.left:
                await batch.until_settled(self._loop_time, self._abandon)
        finally:
            if batch.left:  # cancelled: the call still gets its fate
                self._withdraw(batch)
        return batch.results()[0]

    def _start_each(self, batch: Batch, plans: list[Plan], starter: EagerStarter) -> None:
        for index, plan in enumerate(plans):
            match plan:
                case Run(pending, tool, kwargs, ticket):
                    task = starter.start(
                        self._execute(batch, index, pending, tool, kwargs, ticket), pending
                    )
                    if task is None:  # it finished in its first step
                        continue
                    batch.runs[index] = (pending, tool)  # to abandon it if it overstays
                    scope = pending.scope
                    if ticket is None and scope is not None and scope.deadline == math.inf:
                        pending.arm()  # it suspended: the timeout runs (a gated call's: none yet)
                case Settle(outcome):
                    starter.resume()  # settled by the caller, as the task it is
                    self._settle(batch, index, outcome)
                    continue
                case Wait(own):
                    task = starter.start(self._wait(batch, index, plan), own)
                case Rejoin(first):
                    task = starter.start(self._rejoin(batch, index, first))
                case _:
                    assert_never(plan)
            if task is not None:
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _rest(self, batch: Batch) -> list[Outcome]:
        try:
            await batch.until_settled(self._loop_time, self._abandon)
        finally:
            if batch.left:  # cancelled: every call still gets its fate
                self._withdraw(batch)
        return self._finished(batch)

    def _finished(self, batch: Batch) -> list[Outcome]:
        if self._observers:
            duration = self._clock() - batch.received
            event = BatchSettled(self.session_id, batch.turn, len(batch.calls), duration)
            emit(self._observers, event)
        return batch.results()

    # -- planning -------------------------------------------------------------------------

    def _plan(self, batch: Batch) -> list[Plan]:
        """One plan per call; registers each call that runs or waits (synchronous)."""
        firsts: dict[Hashable, Pending] = {}
        now = self._loop_time()
        return [self._plan_one(batch, firsts, now, i, call) for i, call in enumerate(batch.calls)]

    def _plan_one(
        self, batch: Batch, firsts: dict[Hashable, Pending], now: float, index: int, call: Call
    ) -> Plan:
        call_id = call.id
        running = self._running.get(call_id)
        if running is not None:
            return Rejoin(running)
        earlier = self._answer_of(call_id)
        if earlier is not None:
            self._answered.answered_again(call_id)
            if isinstance(earlier, str):  # its payload was let go: still not run again
                return Settle(outcomes.already_answered(call, earlier))
            return Settle(earlier)
        if batch.refuse:
            return Settle(outcomes.closing(call))
        policy = self.policy
        if index >= policy.max_calls_per_turn:
            return Settle(outcomes.fanout(call, policy.max_calls_per_turn))
        try:
            tool = self._tool_of(call.name)
        except TypeError:  # a name that is not a string matches no tool, unhashable or not
            tool = None
        if tool is None:
            return Settle(outcomes.unknown(call, self.tools.names()))
        try:
            args = call.args
            if tool.plain and type(args) is dict:  # ``tool.convert_arguments``, inline
                arguments = _convert(args, tool.arguments_type)
            else:
                arguments = tool.convert_arguments(args)
            kwargs = _asdict(arguments)
            key: Hashable = (tool.name, canonical := _canonical(arguments))
            app_key = None
            if tool.idempotency_key is not None:
                app_key = (tool.name, tool.idempotency_key(dict(kwargs)))
                hash(app_key)
        except msgspec.ValidationError as exc:
            return Settle(outcomes.invalid_arguments(call, str(exc)))
        except RecursionError:
            message = "the arguments are nested too deeply to read; send a flatter object"
            return Settle(outcomes.invalid_arguments(call, message))
        except Exception as exc:  # unencodable, or a failing idempotency_key
            message = f"the arguments could not be read: {type(exc).__name__}: {exc}"
            return Settle(outcomes.invalid_arguments(call, message))
        first = firsts.get(key)
        if first is not None:  # the same request twice in one toolCall
            if tool.idempotent:
                return self._waiter(call, first, None, "twin")
            return Settle(outcomes.twin(call, first.call.id))
        if app_key is not None:
            self._keyed.expire(batch.received, policy.idempotency_ttl)
            same = self._keyed.get(app_key)
            if same is not None:
                kind = same.first.outcome.kind if same.first.outcome else None
                age = batch.received - same.at
                if served_by_key(kind, age=age, ttl=policy.idempotency_ttl):
                    same.answered_as(call_id)
                    wait = self._waiter(call, same.first, "duplicate", "key")
                    firsts[key] = wait.own  # a twin of this call is still a twin
                    return wait
        request = self._request_of(key)
        if request is not None and not self._is_decided(request):  # ``classify``: a re-issue
            request.answered_as(call_id)
            wait = self._waiter(call, request.first, "duplicate", "reissue")
            firsts[key] = wait.own
            return wait
        ticket = None
        if tool.plain and self._journal is None:  # nothing more to decide before it runs
            pending = Pending(call, now + (tool.timeout or policy.timeout))
        else:
            if self._journal:
                admitted = self._journal.admit(call, tool, canonical, app_key)
                if isinstance(admitted, Outcome):  # answered from a previous owner's journal
                    return Settle(admitted)
                ticket = admitted
            if tool.context_parameter is not None:  # its key now, in plan order; its context later
                failed = request.first.outcome if request is not None else None
                retry = failed is not None and is_failure(failed.kind)
                epoch = self._journal.seq if self._journal else 0
                kwargs[tool.context_parameter] = self._keys.key(
                    tool.name, canonical, epoch, retry=retry
                )
            # A gated call's deadline is set once it is allowed to start (``_allowed``).
            deadline = math.inf if tool.gated else now + (tool.timeout or policy.timeout)
            pending = Pending(call, deadline)
            if tool.irreversible and not batch.confirmed:
                self._gate.hold(call_id, now + policy.confirm_window)
        self._running[call_id] = pending
        firsts[key] = pending
        self._requests.put(key, pending, call_id, batch.received)
        if app_key is not None:
            self._keyed.put(app_key, pending, call_id, batch.received)
        return Run(pending, tool, kwargs, ticket)

    def _decided(self, request: Request[Pending]) -> bool:
        """A repeat of ``request`` is a new request (``classify``) whatever happens next."""
        outcome = request.first.outcome
        if outcome is None:
            return False
        if outcome.kind in FAILURES:
            return True
        ids = request.ids
        if len(ids) == 1:  # as a rule: no re-issue of it yet
            return self._answer_seen(ids[0])
        return any(map(self._answer_seen, ids))

    def _waiter(
        self, call: Call, first: Pending, kind: OutcomeKind | None, reason: DedupReason
    ) -> Wait:
        own = Pending(call)
        self._running[call.id] = own  # cancellable by its own id
        return Wait(own, first, kind, reason)

    # -- settling -------------------------------------------------------------------------

    def _settle(self, batch: Batch, index: int, outcome: Outcome) -> None:
        """The one place a call of a batch gets its outcome: remembered, observed, reported."""
        settled = batch.outcomes
        if settled[index] is not None:  # settled already (abandoned, or run() cancelled)
            return
        settled[index] = outcome
        batch.left -= 1
        self._answered.put(outcome)
        if self._observers:
            call = batch.calls[index]
            tool = self.tools.get(call.name) if isinstance(call.name, str) else None
            behavior = tool.behavior if tool is not None else "BLOCKING"
            known, received = tool is not None, batch.received
            server = getattr(tool, "server", None) or None  # an MCP server's tool
            event = CallSettled(
                self.session_id, batch.turn, call, behavior, outcome, received, known, server
            )
            emit(self._observers, event)
        if (on_settled := batch.on_settled) is not None:
            try:  # ``returns.deliver``, inline
                on_settled(outcome)
            except Exception:
                log.exception("callback %r failed on %r", on_settled, outcome)
        if not batch.left and batch.done is not None:  # last: the delivered answer leaves first
            batch.done.set()

    def _abandon(self, batch: Batch, index: int, pending: Pending, tool: Tool) -> None:
        call = pending.call
        names = (tool.name, call.id)
        text = "tool %s (call %s) ignored its cancellation at the deadline: answered timeout"
        log.warning(text + " and abandoned; it keeps its concurrency slots until it ends", *names)
        outcome = outcomes.abandoned(call, tool.name, tool.timeout or self.policy.timeout, None)
        pending.finish(outcome, self._running)
        self._settle(batch, index, outcome)

    def _withdraw(self, batch: Batch) -> None:
        """``run()`` was cancelled: cancel what still runs and settle each call ``cancelled``."""
        for index in batch.unsettled:
            call = batch.calls[index]
            pending = self._running.get(call.id)
            if pending is not None and pending.call is call:
                if pending.scope is not None:
                    pending.scope.cancel()
                pending.finish(outcomes.cancelled(call, 0.0), self._running)
            self._settle(batch, index, outcomes.cancelled(call, 0.0))

    # -- jobs -----------------------------------------------------------------------------

    async def _wait(self, batch: Batch, index: int, plan: Wait) -> None:
        own = plan.own
        call = own.call
        outcome: Outcome | None = None
        try:  # in its task's scope (``EagerStarter``), which swallows its own cancellation
            if not own.cancel_requested:
                outcome = outcomes.copied(call, await plan.first.wait(), plan.kind, plan.reason)
        finally:
            outcome = outcome or outcomes.cancelled(call, 0.0)
            if own.finish(outcome, self._running):
                self._settle(batch, index, outcome)

    async def _rejoin(self, batch: Batch, index: int, first: Pending) -> None:
        self._settle(batch, index, await first.wait())

    # -- running a handler ----------------------------------------------------------------

    def _limiters(self, tool: Tool) -> tuple[SlotLimiter, ...]:
        """Per-tool, then process-wide, then this dispatcher's (acquired in that order; three
        different objects, so that ``index`` finds where an acquisition stopped)."""
        candidates = (tool.limiter, self.policy.limiter, self._limiter)
        limiters = self._limiters_by_tool[tool.name] = tuple(x for x in candidates if x is not None)
        return limiters

    async def _allowed(self, pending: Pending, tool: Tool) -> Outcome | None:
        """None when the handler may start, else the call's answer: its turn withdrawn before
        it was confirmed (an irreversible tool), or denied by the tool's ``approve`` callback
        (asked only once the turn stands)."""
        call = pending.call
        if tool.irreversible:
            withdrawn = await self._gate.wait(call.id)
            if withdrawn is not None:
                return outcomes.unconfirmed(call, withdrawn)
        if tool.approve is not None:
            journal = self._journal
            conversation = journal.conversation if journal else self.session_id
            arguments = dict(call.args) if isinstance(call.args, dict) else {}
            request = approval.ApprovalRequest(tool.name, arguments, call.id, conversation)
            refusal = await approval.ask(tool.approve, request, tool.approval_timeout)
            if refusal is not None:
                return outcomes.denied(call, refusal)
        return None

    async def _execute(
        self,
        batch: Batch,
        index: int,
        pending: Pending,
        tool: Tool,
        kwargs: dict[str, Any],
        ticket: Ticket | None,
    ) -> None:
        """Run one handler under its limits, in its task's cancel scope, and settle its call.

        A journaled call runs only once its ``started`` entry is written (a store failure is
        its answer). The scope (``pending.scope``) is entered and exited around this coroutine
        by its task (``EagerStarter``): its cancellation passes through here, settling the call
        on the way. A sync handler's thread cannot be interrupted: its slots are handed to the
        thread, which gives them back when it really returns (``ThreadSlots``).
        """
        call = pending.call
        started = 0.0
        acquired: Sequence[SlotLimiter] = ()
        slots: ThreadSlots | None = None
        outcome: Outcome | None = None
        own = self._limiter
        try:
            if pending.cancel_requested:  # cancelled before it started: never run
                return
            try:
                if tool.gated:  # allowed first, holding no slot; its timeout runs from then
                    outcome = await self._allowed(pending, tool)
                    if outcome is not None:
                        return
                    pending.deadline = self._loop_time() + (tool.timeout or self.policy.timeout)
                    batch.rearm()
                    if ticket is None:
                        pending.arm()
                if own.free and tool.limiter is None and self._own_only:  # as a rule
                    own.free -= 1  # ``own.acquire_on_behalf_of_nowait``, inline
                    acquired = self._own
                else:
                    acquired = await self._acquire(pending, tool)
                    if pending.outcome is not None:  # settled while waiting for a slot
                        return
                if ticket is not None:  # its deadline runs once its entry is written, not before
                    await ticket.begin()
                    pending.arm()  # (start() leaves a journaled call's alone)
                if (name := tool.context_parameter) is not None:  # (it holds the key till now)
                    fence = self._journal.lease.epoch if self._journal else None
                    key = kwargs[name]
                    kwargs[name] = CallContext(
                        call.id, tool.name, batch.turn, self.session_id, key, fence
                    )
                started = self._clock()
                if self._observers:
                    event = CallStarted(self.session_id, batch.turn, call, tool.behavior, started)
                    emit(self._observers, event)
                if tool.kind == "async":  # its deadline is armed by start() if it suspends
                    value = await tool.handler(**kwargs)
                elif tool.kind == "sync":
                    pending.arm()
                    slots = ThreadSlots(acquired, pending)
                    value = await slots.run(partial(tool.handler, **kwargs), self._threads)
                else:
                    pending.arm()
                    # Items stream only where the model takes partial answers.
                    on_partial = batch.on_partial if tool.streaming else None
                    max_bytes = self.policy.max_result_bytes
                    value = await returns.stream(call, tool, kwargs, on_partial, max_bytes)
            except Exception as exc:
                latency = self._clock() - started if started else 0.0
                outcome = returns.ended(pending, tool, exc, latency, self.policy.timeout)
            else:  # it returned (the early ends return above)
                latency = self._clock() - started
                outcome = returns.success(call, tool, value, latency, self._max_result_bytes)
            finally:
                if slots is not None:  # a thread's: given back when it returns, unless it did
                    if slots.leave():
                        for limiter in reversed(acquired):
                            limiter.release_on_behalf_of(pending)
                elif acquired is self._own and not own.waiting:
                    own.free += 1  # ``own.release_on_behalf_of``, inline
                else:
                    for limiter in reversed(acquired):
                        limiter.release_on_behalf_of(pending)
        finally:
            if tool.irreversible:
                self._gate.forget(call.id)  # cancelled before it reached the gate
            if outcome is None:
                scope = pending.scope
                if scope is not None and scope.cancel_called:  # the scope's cancellation, leaving
                    latency = self._clock() - started if started else 0.0
                    outcome = returns.ended(pending, tool, None, latency, self.policy.timeout)
                else:
                    outcome = outcomes.cancelled(call, 0.0)
            if pending.outcome is None:  # ``pending.finish``, inline
                pending.outcome = outcome
                self._running.pop(call.id, None)
                if pending.settled is not None:
                    pending.settled.set()
                self._settle(batch, index, outcome)
            if ticket is not None and pending.outcome is not None:  # what the model was answered
                ticket.settled(pending.outcome)

    async def _acquire(self, pending: Pending, tool: Tool) -> Sequence[SlotLimiter]:
        """Take every limiter of ``tool`` (``_limiters``); the ones taken are given back if
        this fails. A busy one is waited for, the ones before it held."""
        limiters = self._limiters_by_tool.get(tool.name) or self._limiters(tool)
        try:  # as a rule, each one is free at once
            for limiter in limiters:
                limiter.acquire_on_behalf_of_nowait(pending)
        except anyio.WouldBlock:  # busy: the ones before it are held, it is waited for
            acquired = list(limiters[: limiters.index(limiter)])
            try:
                await acquire_each(limiters[len(acquired) :], pending, acquired, pending.arm)
            except BaseException:
                for held in reversed(acquired):
                    held.release_on_behalf_of(pending)
                raise
            return acquired
        except BaseException:  # it failed: the ones before it are held, given back
            for held in reversed(limiters[: limiters.index(limiter)]):
                held.release_on_behalf_of(pending)
            raise
        return limiters
