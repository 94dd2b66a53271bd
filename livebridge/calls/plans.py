"""What the dispatcher decided for one call, and the state it shares while the call runs.

Planning is synchronous and pure of I/O: each call of a batch gets one ``Plan``, dispatched
with an exhaustive ``match`` (``assert_never`` makes mypy name every place a new plan must go).
Plans are msgspec Structs untracked by the garbage collector (``gc=False``; none can be part
of a reference cycle), as every record built per call is (benchmarks/PROFILE.md, Hot core).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import anyio
import msgspec

from livebridge.calls.call import Call, DedupReason, Outcome, Partial
from livebridge.calls.endings import OutcomeKind
from livebridge.calls.tools import Tool
from livebridge.errors import InvalidCallError

if TYPE_CHECKING:
    from livebridge.calls.journaled import Ticket

#: Seconds a handler gets after its deadline to end before it is abandoned.
ABANDON_GRACE = 0.25


class Pending(msgspec.Struct, eq=False):
    """A call in flight: its cancel scope, and its outcome once settled.

    The scope is the one its job starts in, set by ``EagerStarter.start`` just before: a call
    cancelled before that is never run. The scope gets its ``deadline`` only once the call
    first suspends (``Dispatcher.start`` arms it when the job comes back suspended): until
    then no timeout can fire, and a handler that finishes without suspending never arms a
    timer. Compared by identity.
    """

    call: Call
    deadline: float = math.inf
    scope: anyio.CancelScope | None = None
    outcome: Outcome | None = None
    settled: asyncio.Event | None = None
    cancel_requested: bool = False

    def finish(self, outcome: Outcome, running: dict[str, Pending]) -> bool:
        """Record the outcome and leave ``running`` (the calls in flight by id, where the
        dispatcher registered it); False if it already had one (abandoned, or run() cancelled).

        Its id is its own in ``running`` from planning until this first finish: a call with
        the id of one in flight rejoins that one, it never replaces it.
        """
        if self.outcome is not None:
            return False
        self.outcome = outcome
        running.pop(self.call.id, None)
        if self.settled is not None:
            self.settled.set()
        return True

    def arm(self) -> None:
        """Its timeout runs from now on: its scope gets its deadline."""
        assert self.scope is not None, "a call's scope is set when its job starts"
        self.scope.deadline = self.deadline

    async def wait(self) -> Outcome:
        if self.outcome is None:
            if self.settled is None:
                self.settled = asyncio.Event()
            await self.settled.wait()
        assert self.outcome is not None
        return self.outcome


class Settle(msgspec.Struct, frozen=True, gc=False):
    """Answer now, without running anything."""

    outcome: Outcome


class Run(msgspec.Struct, frozen=True, gc=False):
    """Run the handler (journaled through ``ticket`` when the session has a store)."""

    pending: Pending
    tool: Tool
    kwargs: dict[str, Any]
    ticket: Ticket | None = None


class Wait(msgspec.Struct, frozen=True, gc=False):
    """Answer with another call's outcome when it settles (copied under this call's id)."""

    own: Pending
    first: Pending
    kind: OutcomeKind | None  # None: the original's kind (an idempotent twin shares it)
    reason: DedupReason


class Rejoin(msgspec.Struct, frozen=True, gc=False):
    """The same id is running in another batch: this delivery gets that very outcome."""

    first: Pending


Plan: TypeAlias = Settle | Run | Wait | Rejoin


class Batch:
    """One ``run()``: its calls, and each call's outcome once settled (exactly once)."""

    __slots__ = (
        "calls",
        "confirmed",
        "done",
        "left",
        "on_partial",
        "on_settled",
        "outcomes",
        "received",
        "refuse",
        "runs",
        "turn",
    )

    def __init__(
        self,
        calls: Sequence[Call],
        turn: int,
        on_settled: Callable[[Outcome], None] | None,
        on_partial: Callable[[Partial], None] | None,
        received: float,
        refuse: bool = False,
        confirmed: bool = True,
    ) -> None:
        self.calls = calls
        self.refuse = refuse
        self.confirmed = confirmed  # False: the turn that issued them may yet be withdrawn
        self.turn = turn
        self.on_settled = on_settled
        self.on_partial = on_partial
        self.received = received
        self.outcomes: list[Outcome | None] = [None] * len(calls)
        self.left = len(calls)  # calls without an outcome: no scan per settle
        self.runs: dict[int, tuple[Pending, Tool]] = {}
        self.done: asyncio.Event | None = None

    @property
    def unsettled(self) -> list[int]:
        return [i for i, outcome in enumerate(self.outcomes) if outcome is None]

    def results(self) -> list[Outcome]:
        assert not self.left, "every call settles before run() returns"
        return self.outcomes  # type: ignore[return-value]

    def rearm(self) -> None:
        """A call's deadline changed: ``until_settled`` looks at the deadlines again."""
        done = self.done
        if done is not None and not done.is_set():
            self.done = asyncio.Event()
            done.set()

    async def until_settled(
        self,
        loop_time: Callable[[], float],
        abandon: Callable[[Batch, int, Pending, Tool], None],
    ) -> None:
        """Wait until every call has its outcome; ``abandon`` each handler still running
        ``ABANDON_GRACE`` seconds past its deadline (on the loop's clock, ``loop_time``).

        asyncio's event and timeout, not anyio's: this runs for every batch whose handlers
        suspend, and deadlines are on the loop's clock either way (benchmarks/PROFILE.md).
        """
        while self.left:
            self.done = self.done or asyncio.Event()
            overdue = [
                pending.deadline
                for i, (pending, _) in self.runs.items()
                if self.outcomes[i] is None
            ]
            deadline = min(overdue, default=math.inf) + ABANDON_GRACE
            try:
                async with asyncio.timeout_at(None if deadline == math.inf else deadline):
                    await self.done.wait()
            except TimeoutError:
                pass
            now = loop_time()
            for index, (pending, tool) in list(self.runs.items()):
                if self.outcomes[index] is None and pending.deadline + ABANDON_GRACE <= now:
                    abandon(self, index, pending, tool)


def check_calls(calls: Sequence[Call]) -> None:
    """Raise ``InvalidCallError`` for an item that is not a ``Call`` with a usable id: such a
    call could never be answered, so a batch holding one is refused before anything runs."""
    for position, call in enumerate(calls):
        if not isinstance(call, Call):
            what = f"calls[{position}] is a {type(call).__name__}, not a livebridge.Call"
            raise InvalidCallError(what)
        if not isinstance(call.id, str) or not call.id:
            what = f"calls[{position}] ({call.name!r}) needs a non-empty string id, not {call.id!r}"
            raise InvalidCallError(what)
