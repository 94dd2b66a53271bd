"""Calls start inline in the caller's task: what a task of their own would give must still hold."""

from __future__ import annotations

import asyncio
import contextvars

import anyio
import anyio.lowlevel

from livebridge import Call, CallPolicy, Dispatcher, Outcome, ToolRegistry
from tests.support.timing import seconds

marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")


def batch(*names: str) -> list[Call]:
    return [Call(f"c{index}", name, {"n": index}) for index, name in enumerate(names)]


async def test_a_handler_context_change_stays_with_its_call() -> None:
    tools = ToolRegistry()
    seen: list[str] = []

    @tools.tool
    async def mark(n: int) -> None:
        marker.set("changed")

    @tools.tool
    async def read(n: int) -> str:
        seen.append(marker.get())
        await anyio.lowlevel.checkpoint()
        return marker.get()

    outcomes = await Dispatcher(tools).run(batch("mark", "read", "mark", "read"))
    assert [o.response for o in outcomes[1::2]] == [{"output": "unset"}] * 2
    assert seen == ["unset", "unset"] and marker.get() == "unset"


async def test_mixed_batch_keeps_timeouts_cancellation_and_handler_scopes() -> None:
    tools = ToolRegistry()
    started = anyio.Event()

    @tools.tool
    async def instant(n: int) -> str:
        return "now"

    @tools.tool(timeout=0.05)
    async def hang(n: int) -> None:
        await anyio.Event().wait()

    @tools.tool
    async def scoped(n: int) -> str:
        with anyio.fail_after(seconds(30)):
            await anyio.lowlevel.checkpoint()
        return "scoped"

    @tools.tool
    async def waits(n: int) -> None:
        started.set()
        await anyio.Event().wait()

    dispatcher = Dispatcher(tools, CallPolicy(timeout=30))
    calls = batch("instant", "hang", "scoped", "waits", "instant")

    async def cancel_when_started() -> None:
        await started.wait()
        assert dispatcher.cancel("c3")

    async with anyio.create_task_group() as tg:
        tg.start_soon(cancel_when_started)
        outcomes = await dispatcher.run(calls)
    kinds = [o.kind for o in outcomes]
    assert kinds == ["ok", "timeout", "ok", "cancelled", "ok"]
    assert outcomes[2].response == {"output": "scoped"}


async def test_a_caller_holding_the_shared_limiter_can_still_run_a_batch() -> None:
    tools = ToolRegistry()
    shared = anyio.CapacityLimiter(4)

    @tools.tool
    async def slow(n: int) -> str:
        await anyio.lowlevel.checkpoint()
        return "done"

    dispatcher = Dispatcher(tools, CallPolicy(limiter=shared))
    async with shared:
        outcomes = await dispatcher.run(batch("slow", "slow"))
    assert [o.kind for o in outcomes] == ["ok", "ok"]


async def test_calls_that_finish_at_once_share_a_scope_a_cancelled_one_does_not_pass_on() -> None:
    tools = ToolRegistry()
    dispatcher = Dispatcher(tools, CallPolicy(timeout=30))
    scopes: list[float] = []

    @tools.tool
    async def cancel(n: int) -> str:
        """Cancels its own call and the one after it, then finishes without suspending."""
        assert dispatcher.cancel(f"c{n}") and dispatcher.cancel(f"c{n + 1}")
        return "done anyway"

    @tools.tool
    async def sleep(n: int) -> str:
        scopes.append(anyio.current_effective_deadline())
        await anyio.sleep(0.01)  # would be cancelled at once in a cancelled scope
        return "slept"

    @tools.tool
    async def instant(n: int) -> str:
        return "now"

    calls = batch("instant", "cancel", "instant", "sleep", "instant")
    outcomes = await dispatcher.run(calls)
    # A cancel during a handler's first step cannot interrupt it; the call after it was
    # cancelled before it started, so it never ran; the scope the cancelled one ran in was
    # not shared on, so the next handler sleeps undisturbed, with its own deadline.
    assert [o.kind for o in outcomes] == ["ok", "ok", "cancelled", "ok", "ok"]
    assert outcomes[1].response == {"output": "done anyway"}
    assert outcomes[3].response == {"output": "slept"}
    assert scopes == [float("inf")]  # the deadline is set once it suspends


async def test_start_settles_at_once_what_needs_no_wait_and_hands_back_the_rest() -> None:
    tools = ToolRegistry()
    release = anyio.Event()

    @tools.tool
    async def instant(n: int) -> int:
        return n

    @tools.tool
    async def waits(n: int) -> int:
        await release.wait()
        return n

    dispatcher = Dispatcher(tools)
    settled: list[str] = []
    now = dispatcher.start(
        batch("instant", "instant"), on_settled=lambda o: settled.append(o.call_id)
    )
    assert isinstance(now, list) and [o.response for o in now] == [{"output": 0}, {"output": 1}]
    assert settled == ["c0", "c1"]  # before start() returned: no task, no wait

    later = dispatcher.start([Call("w0", "waits", {"n": 7}), Call("i1", "instant", {"n": 8})])
    assert not isinstance(later, list)
    release.set()
    assert [o.response for o in await later] == [{"output": 7}, {"output": 8}]

    release = anyio.Event()  # never set: the call runs until its waiter is cancelled
    stuck = dispatcher.start([Call("w1", "waits", {"n": 1})])
    assert not isinstance(stuck, list)
    with anyio.move_on_after(0.05):
        await stuck
    answer = dispatcher.answered("w1")
    assert answer is not None and answer.kind == "cancelled"


async def test_each_handler_runs_as_a_task_and_the_caller_is_itself_again_after() -> None:
    """Handlers that finish at once run as a task that is not the caller's (also one that
    runs a batch of its own on the same dispatcher); the caller settles what needs no
    handler, and is the current task again once ``start()`` returns."""
    tools = ToolRegistry()
    dispatcher = Dispatcher(tools)
    caller = asyncio.current_task()
    ran_as: list[asyncio.Task[object] | None] = []
    settled_as: dict[str, asyncio.Task[object] | None] = {}

    @tools.tool
    async def instant(n: int) -> int:
        ran_as.append(asyncio.current_task())
        return n

    @tools.tool
    async def nested(n: int) -> list[int]:
        mine = asyncio.current_task()
        inner = await dispatcher.run([Call(f"inner{n}", "instant", {"n": 100})])
        assert asyncio.current_task() is mine
        ran_as.append(mine)
        return [o.response["output"] for o in inner]

    def on_settled(outcome: Outcome) -> None:
        settled_as[outcome.call_id] = asyncio.current_task()

    calls = batch("instant", "instant", "unknown", "nested", "instant")
    now = dispatcher.start(calls, on_settled=on_settled)
    assert asyncio.current_task() is caller
    assert isinstance(now, list)
    assert [o.kind for o in now] == ["ok", "ok", "rejected", "ok", "ok"]
    assert now[3].response == {"output": [100]}
    assert len(ran_as) == 5 and caller not in ran_as
    assert settled_as["c2"] is caller  # answered without a handler: by the caller itself
    assert [o.kind for o in await dispatcher.run(batch("instant"))] == ["ok"]  # still usable
    assert asyncio.current_task() is caller
