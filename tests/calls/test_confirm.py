"""``TurnGate``: a held call starts once confirmed, never once withdrawn, and silence for the
window confirms it; a verdict that comes first is kept, and nothing is remembered after."""

from __future__ import annotations

import asyncio

import anyio

from livebridge import Call, CallPolicy, Dispatcher, Outcome, ToolRegistry
from livebridge.calls.confirm import TurnGate
from tests.support.timing import seconds


async def test_a_call_never_held_goes_at_once() -> None:
    assert await TurnGate().wait("c1") is None


async def test_a_confirmation_releases_a_waiting_call() -> None:
    gate, loop = TurnGate(), asyncio.get_running_loop()
    gate.hold("c1", loop.time() + 60)
    async with anyio.create_task_group() as tg:
        verdicts: list[str | None] = []

        async def waiter() -> None:
            verdicts.append(await gate.wait("c1"))

        tg.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        assert verdicts == []  # held
        gate.decide(["c1", "unknown"])
    assert verdicts == [None]
    assert len(gate) == 0


async def test_a_verdict_before_the_wait_is_kept_and_the_first_verdict_wins() -> None:
    gate, loop = TurnGate(), asyncio.get_running_loop()
    gate.hold("c1", loop.time() + 60)
    gate.decide(["c1"], withdrawn="the model's turn was interrupted")
    gate.decide(["c1"])  # too late: withdrawn stays withdrawn
    assert await gate.wait("c1") == "the model's turn was interrupted"
    assert len(gate) == 0


async def test_silence_for_the_window_confirms() -> None:
    gate, loop = TurnGate(), asyncio.get_running_loop()
    until = loop.time() + 0.05
    gate.hold("c1", until)
    with anyio.fail_after(seconds(10)):
        assert await gate.wait("c1") is None
    assert loop.time() >= until - 0.01  # not before the window (the loop's clock resolution)
    assert len(gate) == 0


async def test_a_call_forgotten_before_its_wait_leaves_nothing_behind() -> None:
    gate = TurnGate()
    gate.hold("c1", asyncio.get_running_loop().time() + 60)
    gate.forget("c1")
    assert len(gate) == 0
    assert await gate.wait("c1") is None


async def test_a_held_call_holds_no_slot_and_no_deadline() -> None:
    """With one slot and a 0.2 s timeout, a call of another tool runs while the irreversible
    one waits for its turn; confirmed, it runs and is not timed out for the wait."""
    tools = ToolRegistry()
    ran: list[str] = []

    @tools.tool(irreversible=True)
    async def end_call(reason: str) -> str:
        """Hang up."""
        ran.append("end_call")
        return "hung up"

    @tools.tool
    async def lookup(city: str) -> str:
        """Look up."""
        ran.append("lookup")
        return city

    policy = CallPolicy(max_parallel=1, timeout=0.2, confirm_window=60.0)
    dispatcher = Dispatcher(tools, policy)
    held: list[Outcome] = []
    async with anyio.create_task_group() as tg:

        async def first() -> None:
            held.extend(
                await dispatcher.run([Call("c1", "end_call", {"reason": "x"})], confirmed=False)
            )

        tg.start_soon(first)
        await anyio.wait_all_tasks_blocked()
        with anyio.fail_after(seconds(10)):  # it would wait for the slot forever
            (other,) = await dispatcher.run([Call("c2", "lookup", {"city": "Oslo"})])
        assert other.kind == "ok" and ran == ["lookup"]
        await anyio.sleep(0.3)  # longer than the timeout, on purpose: the wait is not counted
        dispatcher.confirm(["c1"])
    assert [o.kind for o in held] == ["ok"] and ran == ["lookup", "end_call"]


async def test_a_withdrawn_call_is_answered_cancelled_and_never_runs() -> None:
    tools = ToolRegistry()

    @tools.tool(irreversible=True)
    async def end_call(reason: str) -> str:
        """Hang up."""
        raise AssertionError("never runs")

    dispatcher = Dispatcher(tools, CallPolicy(confirm_window=60.0))
    async with anyio.create_task_group() as tg:
        outcomes: list[Outcome] = []

        async def run() -> None:
            calls = [Call("c1", "end_call", {"reason": "x"})]
            outcomes.extend(await dispatcher.run(calls, confirmed=False))

        tg.start_soon(run)
        await anyio.wait_all_tasks_blocked()
        dispatcher.confirm(["c1"], withdrawn="the model's turn was interrupted")
    (outcome,) = outcomes
    assert outcome.kind == "cancelled"
    assert outcome.response["error"]["type"] == "cancelled"
    assert "interrupted" in outcome.response["error"]["message"]
