"""The eager start (``livebridge.calls.eager``) on the running interpreter's asyncio internals.

It swaps the current task with ``asyncio.tasks._enter_task``/``_leave_task`` and enters and
exits anyio cancel scopes by hand; where asyncio keeps the current task differs between Python
versions, so these run on every supported interpreter (the Makefile's ``INTERPRETER_TESTS``).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any

import anyio
import pytest

from livebridge import Call, Dispatcher, ToolRegistry
from livebridge.calls import eager
from livebridge.calls.eager import EagerStarter


class Holder:
    """What ``start`` tells the scope its coroutine runs in."""

    def __init__(self) -> None:
        self.scope: anyio.CancelScope | None = None


class Seen:
    """What a coroutine saw in its first step and after it resumed."""

    def __init__(self) -> None:
        self.first: asyncio.Task[Any] | None = None
        self.later: asyncio.Task[Any] | None = None


async def finishes(seen: Seen) -> str:
    seen.first = asyncio.current_task()
    return "done"


async def suspends(seen: Seen, go: asyncio.Event) -> str:
    seen.first = asyncio.current_task()
    await go.wait()
    seen.later = asyncio.current_task()
    return "done"


def start_all(
    starter: EagerStarter, coroutines: list[tuple[Coroutine[Any, Any, Any], Holder]]
) -> list[asyncio.Task[Any] | None]:
    token = starter.enter()
    try:
        return [starter.start(coroutine, holder) for coroutine, holder in coroutines]
    finally:
        starter.exit(token)


async def test_a_first_step_runs_as_a_task_of_its_own_and_the_caller_is_current_after() -> None:
    caller = asyncio.current_task()
    starter = EagerStarter()
    seen, holder = Seen(), Holder()
    assert start_all(starter, [(finishes(seen), holder)]) == [None]
    assert seen.first is not None and seen.first is not caller
    assert asyncio.current_task() is caller
    assert holder.scope is not None and not holder.scope.cancel_called


async def test_coroutines_that_finish_at_once_share_one_task_and_one_scope() -> None:
    starter = EagerStarter()
    seen = [Seen(), Seen(), Seen()]
    holders = [Holder(), Holder(), Holder()]
    assert (
        start_all(starter, [(finishes(s), h) for s, h in zip(seen, holders, strict=True)])
        == [None] * 3
    )
    assert seen[0].first is seen[1].first is seen[2].first
    assert holders[0].scope is holders[1].scope is holders[2].scope


async def test_one_that_suspends_keeps_its_task_and_the_next_gets_another() -> None:
    caller = asyncio.current_task()
    starter = EagerStarter()
    go = asyncio.Event()
    first, second = Seen(), Seen()
    started = [(suspends(first, go), Holder()), (finishes(second), Holder())]
    task, after = start_all(starter, started)
    assert task is not None and after is None
    assert first.first is task and second.first is not task
    assert asyncio.current_task() is caller
    go.set()
    assert await task == "done"
    assert first.later is task


async def test_the_scope_given_cancels_its_coroutine_quietly_as_a_with_block_would() -> None:
    starter = EagerStarter()
    seen, holder = Seen(), Holder()
    [task] = start_all(starter, [(suspends(seen, asyncio.Event()), holder)])
    assert task is not None and holder.scope is not None
    holder.scope.cancel()
    assert await task is None  # the scope swallowed its own cancellation
    assert seen.later is None and not task.cancelled()


async def test_a_scope_given_a_deadline_is_not_shared_on() -> None:
    starter = EagerStarter()
    holders = [Holder(), Holder()]

    async def sets_deadline(holder: Holder) -> None:
        assert holder.scope is not None
        holder.scope.deadline = 0.0

    start_all(starter, [(sets_deadline(holders[0]), holders[0]), (finishes(Seen()), holders[1])])
    assert holders[0].scope is not None and holders[1].scope is not None
    assert holders[0].scope is not holders[1].scope
    assert holders[1].scope.deadline == float("inf")


async def test_a_first_step_that_raises_raises_in_the_caller_who_is_current_again() -> None:
    caller = asyncio.current_task()
    starter = EagerStarter()

    async def fails() -> None:
        raise LookupError("first step")

    with pytest.raises(LookupError, match="first step"):
        start_all(starter, [(fails(), Holder())])
    assert asyncio.current_task() is caller
    assert start_all(starter, [(finishes(Seen()), Holder())]) == [None]  # it still starts


async def test_a_cancellation_before_the_tasks_first_step_reaches_the_coroutine() -> None:
    starter = EagerStarter()
    reached = asyncio.Event()

    async def waits() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            reached.set()
            raise

    [task] = start_all(starter, [(waits(), Holder())])
    assert task is not None
    task.cancel()  # before the loop ran the task at all
    with pytest.raises(asyncio.CancelledError):
        await task
    assert reached.is_set()


async def test_resume_gives_the_caller_back_between_starts() -> None:
    caller = asyncio.current_task()
    starter = EagerStarter()
    seen: list[asyncio.Task[Any] | None] = []
    token = starter.enter()
    try:
        starter.start(finishes(Seen()), Holder())
        starter.resume()
        seen.append(asyncio.current_task())
        starter.start(finishes(Seen()), Holder())
    finally:
        starter.exit(token)
    assert seen == [caller] and asyncio.current_task() is caller


@pytest.mark.skipif(sys.version_info < (3, 12), reason="asyncio.eager_task_factory is 3.12+")
async def test_a_loop_with_an_eager_task_factory_runs_a_suspended_coroutine_to_its_end() -> None:
    loop = asyncio.get_running_loop()
    loop.set_task_factory(asyncio.eager_task_factory)  # type: ignore[attr-defined,unused-ignore]
    try:
        starter = EagerStarter()
        go = asyncio.Event()
        seen = Seen()
        [task] = start_all(starter, [(suspends(seen, go), Holder())])
        assert task is not None and not task.done()
        go.set()
        assert await task == "done"
        assert seen.later is task
    finally:
        loop.set_task_factory(None)


async def spare_of(starter: EagerStarter) -> asyncio.Task[Any]:
    """The task coroutines that finish at once share: started through, then found again."""
    seen = Seen()
    assert start_all(starter, [(finishes(seen), Holder())]) == [None]
    assert seen.first is not None
    return seen.first


async def test_the_spare_task_and_its_scope_outlive_loop_passes_between_runs() -> None:
    starter = EagerStarter()
    holders = [Holder(), Holder()]
    seen = [Seen(), Seen()]
    start_all(starter, [(finishes(seen[0]), holders[0])])
    for _ in range(3):  # the loop runs the spare's task meanwhile: it waits to be used
        await asyncio.sleep(0)
    start_all(starter, [(finishes(seen[1]), holders[1])])
    assert seen[0].first is seen[1].first
    assert seen[0].first is not None and not seen[0].first.done()
    assert holders[0].scope is holders[1].scope
    starter.close()
    await asyncio.wait_for(seen[0].first, timeout=5)


async def test_a_coroutine_that_suspends_in_a_waiting_spare_carries_on_in_it() -> None:
    starter = EagerStarter()
    spare = await spare_of(starter)
    await asyncio.sleep(0)  # the spare now waits for a coroutine
    go = asyncio.Event()
    seen = Seen()
    [task] = start_all(starter, [(suspends(seen, go), Holder())])
    assert task is spare and seen.first is spare
    go.set()
    assert await asyncio.wait_for(task, timeout=5) == "done"
    assert seen.later is spare


async def test_a_waiting_spare_cancelled_with_its_coroutine_cancels_the_coroutine() -> None:
    starter = EagerStarter()
    await spare_of(starter)
    await asyncio.sleep(0)
    seen, holder = Seen(), Holder()
    [task] = start_all(starter, [(suspends(seen, asyncio.Event()), holder)])
    assert task is not None and holder.scope is not None
    holder.scope.cancel()
    assert await asyncio.wait_for(task, timeout=5) is None
    assert seen.later is None and not task.cancelled()


async def test_a_spare_nothing_uses_ends_by_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(eager, "SPARE_IDLE", 0.0)
    starter = EagerStarter()
    spare = await spare_of(starter)
    await asyncio.wait_for(spare, timeout=5)  # its scope exited as it ended: no error
    assert spare.done() and not spare.cancelled()
    other = await spare_of(starter)  # the next start makes another
    assert other is not spare
    starter.close()
    await asyncio.wait_for(other, timeout=5)


async def test_close_ends_a_spare_the_loop_has_not_run_yet() -> None:
    starter = EagerStarter()
    spare = await spare_of(starter)
    starter.close()
    await asyncio.wait_for(spare, timeout=5)
    assert spare.done() and not spare.cancelled()


async def test_a_spared_scope_cancelled_is_not_parked_on() -> None:
    starter = EagerStarter()
    first = await spare_of(starter)
    await asyncio.sleep(0)

    async def cancels_its_scope(holder: Holder) -> None:
        assert holder.scope is not None
        holder.scope.cancel()

    holder = Holder()
    start_all(starter, [(cancels_its_scope(holder), holder)])
    await asyncio.wait_for(first, timeout=5)  # retired: the parked task ended
    assert await spare_of(starter) is not first
    starter.close()


async def test_a_dispatchers_batches_share_one_task_until_it_closes() -> None:
    tools = ToolRegistry()
    ran_in: list[asyncio.Task[Any] | None] = []

    @tools.tool
    async def where() -> str:
        """Say nothing; note the task it ran in."""
        ran_in.append(asyncio.current_task())
        return "here"

    dispatcher = Dispatcher(tools)
    for turn in range(3):
        [outcome] = await dispatcher.run([Call(f"c{turn}", "where", {})], turn=turn)
        assert outcome.kind == "ok"
        await asyncio.sleep(0)  # the loop runs between turns, as a session's does
    assert len(set(ran_in)) == 1 and ran_in[0] is not asyncio.current_task()
    spare = ran_in[0]
    assert spare is not None and not spare.done()
    assert await dispatcher.aclose() == 0
    await asyncio.wait_for(spare, timeout=5)


async def test_a_call_that_suspends_in_a_parked_spare_still_times_out() -> None:
    tools = ToolRegistry()
    never = asyncio.Event()

    @tools.tool
    async def quick() -> str:
        """Answer at once."""
        return "quick"

    @tools.tool(timeout=0.05)
    async def stuck() -> str:
        """Wait for what never comes."""
        await never.wait()
        return "late"

    dispatcher = Dispatcher(tools)
    [first] = await dispatcher.run([Call("a", "quick", {})])
    await asyncio.sleep(0)  # the spare parks
    [late] = await asyncio.wait_for(dispatcher.run([Call("b", "stuck", {})], turn=1), 5)
    assert (first.kind, late.kind) == ("ok", "timeout")
    [again] = await dispatcher.run([Call("c", "quick", {})], turn=2)
    assert again.kind == "ok"
    assert await dispatcher.aclose() == 0
