import anyio
import pytest

from livebridge.protocol.wakeup import Wakeup
from tests.support.timing import seconds


async def test_a_set_before_the_wait_is_consumed_by_the_next_wait() -> None:
    wake = Wakeup()
    wake.set()
    wake.set()  # setting a set flag changes nothing
    with anyio.fail_after(seconds(5)):
        await wake.wait()
    with anyio.move_on_after(0.05) as scope:
        await wake.wait()  # consumed: this one waits
    assert scope.cancelled_caught


async def test_every_waiting_task_wakes_and_the_set_is_consumed() -> None:
    wake = Wakeup()
    woken: list[int] = []

    async def waiter(i: int) -> None:
        await wake.wait()
        woken.append(i)

    with anyio.fail_after(seconds(5)):
        async with anyio.create_task_group() as tg:
            for i in range(3):
                tg.start_soon(waiter, i)
            await anyio.wait_all_tasks_blocked()
            wake.set()
    assert sorted(woken) == [0, 1, 2]
    with anyio.move_on_after(0.05) as scope:
        await wake.wait()
    assert scope.cancelled_caught


async def test_a_cancelled_waiter_leaves_the_others_waiting_for_the_set() -> None:
    wake = Wakeup()
    woken: list[str] = []
    scopes: list[anyio.CancelScope] = []

    async def waiter() -> None:
        await wake.wait()
        woken.append("kept")

    async def cancelled() -> None:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            await wake.wait()
        woken.append("cancelled" if scope.cancelled_caught else "woken")

    with anyio.fail_after(seconds(5)):
        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            tg.start_soon(cancelled)
            await anyio.wait_all_tasks_blocked()
            scopes[0].cancel()
            await anyio.wait_all_tasks_blocked()
            assert woken == ["cancelled"]  # the other waiter still waits
            wake.set()
    assert woken == ["cancelled", "kept"]


async def test_a_waiter_consumes_only_the_set_that_woke_it() -> None:
    wake = Wakeup()
    woken: list[int] = []

    async def waiter(i: int) -> None:
        await wake.wait()
        woken.append(i)
        if len(woken) == 1:
            wake.set()  # a new set, after the one that woke both

    with anyio.fail_after(seconds(5)):
        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter, 0)
            tg.start_soon(waiter, 1)
            await anyio.wait_all_tasks_blocked()
            wake.set()
        assert sorted(woken) == [0, 1]
        await wake.wait()  # returns: the second waiter to wake did not consume the new set


@pytest.mark.parametrize("waiters", [1, 2])
async def test_waiting_again_after_a_wake_up_waits_for_the_next_set(waiters: int) -> None:
    wake = Wakeup()
    rounds: list[int] = []

    async def loop(i: int) -> None:
        for _ in range(2):
            await wake.wait()
            rounds.append(i)

    with anyio.fail_after(seconds(5)):
        async with anyio.create_task_group() as tg:
            for i in range(waiters):
                tg.start_soon(loop, i)
            for _ in range(2):
                await anyio.wait_all_tasks_blocked()
                wake.set()
    assert len(rounds) == 2 * waiters


async def test_clear_forgets_an_unconsumed_set_but_not_a_task_it_already_woke() -> None:
    wake = Wakeup()
    wake.set()
    wake.clear()
    with anyio.move_on_after(0.05) as scope:
        await wake.wait()  # the set was forgotten: this one waits
    assert scope.cancelled_caught
    woken: list[str] = []

    async def waiter() -> None:
        await wake.wait()
        woken.append("woken")

    with anyio.fail_after(seconds(5)):
        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            wake.set()
            wake.clear()  # after the set reached the waiting task
    assert woken == ["woken"]
