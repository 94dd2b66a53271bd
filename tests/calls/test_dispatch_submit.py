"""``Dispatcher.submit``: one call in, its one outcome out, on the batch path's rules.

A framework runs each tool call on its own; these tests check that calls submitted one by one
share what a batch's calls share (limits, twins and fan-out within a turn, re-issues, keys,
observers), and that ``report`` decides whether an identical later call runs again.
"""

from __future__ import annotations

import anyio
import pytest

from livebridge import Call, CallPolicy, Dispatcher, Outcome, Recorder, ToolRegistry
from livebridge.calls.observers import BatchStarted, CallSettled, CallStarted


def tools() -> tuple[ToolRegistry, dict[str, int], dict[str, anyio.Event]]:
    registry = ToolRegistry()
    runs: dict[str, int] = {}
    gates: dict[str, anyio.Event] = {}

    @registry.tool
    async def order(item: str) -> str:
        """Not idempotent: ordering twice orders two."""
        runs[item] = runs.get(item, 0) + 1
        if item in gates:
            await gates[item].wait()
        return f"ordered {item}"

    @registry.tool(idempotent=True)
    async def lookup(key: str) -> str:
        runs[key] = runs.get(key, 0) + 1
        if key in gates:
            await gates[key].wait()
        return key.upper()

    @registry.tool(timeout=0.2)
    async def stall() -> None:
        await anyio.sleep_forever()

    return registry, runs, gates


async def test_one_call_one_outcome() -> None:
    registry, runs, _ = tools()
    dispatcher = Dispatcher(registry)
    outcome = await dispatcher.submit(Call("c1", "lookup", {"key": "a"}))
    assert (outcome.call_id, outcome.kind, outcome.response) == ("c1", "ok", {"output": "A"})
    bad = await dispatcher.submit(Call("c2", "lookup", {"key": 3}))
    assert bad.kind == "rejected" and bad.response["error"]["type"] == "invalid_arguments"
    unknown = await dispatcher.submit(Call("c3", "nope", {}))
    assert unknown.response["error"]["type"] == "unknown_function"
    assert runs == {"a": 1}


async def test_twins_and_fanout_within_one_turn() -> None:
    registry, runs, gates = tools()
    gates["tea"] = anyio.Event()
    dispatcher = Dispatcher(registry, CallPolicy(max_calls_per_turn=3))
    got: dict[str, Outcome] = {}

    async def submit(call: Call, turn: int) -> None:
        got[call.id] = await dispatcher.submit(call, turn=turn)

    async with anyio.create_task_group() as group:
        group.start_soon(submit, Call("a", "order", {"item": "tea"}), 1)
        group.start_soon(submit, Call("b", "order", {"item": "tea"}), 1)  # a twin
        group.start_soon(submit, Call("c", "lookup", {"key": "k"}), 1)
        group.start_soon(submit, Call("d", "lookup", {"key": "z"}), 1)  # the fourth of three
        group.start_soon(submit, Call("e", "lookup", {"key": "z"}), 2)  # another turn
        await anyio.wait_all_tasks_blocked()
        gates["tea"].set()
    assert got["a"].kind == "ok"
    assert got["b"].kind == "duplicate" and got["b"].response["error"]["type"] == "duplicate_call"
    assert got["d"].response["error"]["type"] == "fanout_limit"
    assert got["e"].kind == "ok"
    assert runs == {"tea": 1, "k": 1, "z": 1}


async def test_reissue_while_running_runs_once() -> None:
    registry, runs, gates = tools()
    gates["tea"] = anyio.Event()
    dispatcher = Dispatcher(registry)
    got: list[Outcome] = []

    async def submit(call_id: str) -> None:
        got.append(await dispatcher.submit(Call(call_id, "order", {"item": "tea"})))

    async with anyio.create_task_group() as group:
        for call_id in ("first", "again", "third"):  # each its own turn, new ids
            group.start_soon(submit, call_id)
        await anyio.wait_all_tasks_blocked()
        gates["tea"].set()
    assert runs == {"tea": 1}
    assert sorted(o.kind for o in got) == ["duplicate", "duplicate", "ok"]
    assert {o.dedup for o in got if o.kind == "duplicate"} == {"reissue"}


async def test_report_decides_whether_a_repeat_runs() -> None:
    registry, runs, _ = tools()
    dispatcher = Dispatcher(registry)
    first = await dispatcher.submit(Call("1", "order", {"item": "tea"}), reported=True)
    # Not yet reported sent: the model cannot have seen it, so the same call is a re-issue.
    again = await dispatcher.submit(Call("2", "order", {"item": "tea"}), reported=True)
    assert (first.kind, again.kind, again.duplicate_of, runs) == (
        "ok",
        "duplicate",
        "1",
        {"tea": 1},
    )
    dispatcher.report("1", sent=True)
    more = await dispatcher.submit(Call("3", "order", {"item": "tea"}))
    assert more.kind == "ok" and runs == {"tea": 2}  # seen: "and one more tea"
    dispatcher.report("3", sent=False)  # lost with the connection
    lost = await dispatcher.submit(Call("4", "order", {"item": "tea"}))
    assert (lost.kind, lost.duplicate_of, runs) == ("duplicate", "3", {"tea": 2})


async def test_without_reports_a_settled_answer_counts_as_seen() -> None:
    registry, runs, _ = tools()
    dispatcher = Dispatcher(registry)
    for call_id in ("1", "2"):
        assert (await dispatcher.submit(Call(call_id, "order", {"item": "tea"}))).kind == "ok"
    assert runs == {"tea": 2}


async def test_timeout_cancellation_limits_and_observers() -> None:
    registry, runs, gates = tools()
    recorder = Recorder()
    dispatcher = Dispatcher(registry, CallPolicy(max_parallel=1), observers=[recorder])
    timed_out = await dispatcher.submit(Call("t", "stall", {}))
    assert timed_out.kind == "timeout" and timed_out.response["error"]["type"] == "timeout"

    gates["slow"] = anyio.Event()
    got: dict[str, Outcome] = {}

    async def submit(call: Call) -> None:
        got[call.id] = await dispatcher.submit(call)

    async with anyio.create_task_group() as group:
        group.start_soon(submit, Call("s", "lookup", {"key": "slow"}))
        await anyio.wait_all_tasks_blocked()
        group.start_soon(submit, Call("w", "lookup", {"key": "other"}))  # waits for the slot
        await anyio.wait_all_tasks_blocked()
        assert "other" not in runs  # max_parallel=1 holds across submits
        with anyio.CancelScope() as scope:  # the framework cancels the first (an interruption)
            scope.cancel()
            await dispatcher.submit(Call("s", "lookup", {"key": "slow"}))  # rejoins, cancelled
        assert dispatcher.cancel("s")
    assert got["s"].kind == "cancelled" and got["w"].kind == "ok"
    settled = {e.outcome.call_id: e.outcome.kind for e in recorder.of(CallSettled)}
    assert settled == {"t": "timeout", "s": "cancelled", "w": "ok"}
    assert {e.call.id for e in recorder.of(CallStarted)} == {"t", "s", "w"}
    assert not recorder.of(BatchStarted)  # a turn's calls arrive one by one: no batch


async def test_idempotency_key_across_submits() -> None:
    registry = ToolRegistry()
    charges: list[str] = []

    @registry.tool(idempotency_key=lambda args: args["order_id"])
    async def charge(order_id: str, amount: int) -> str:
        charges.append(order_id)
        return "charged"

    dispatcher = Dispatcher(registry)
    one = await dispatcher.submit(Call("1", "charge", {"order_id": "o1", "amount": 5}))
    two = await dispatcher.submit(Call("2", "charge", {"order_id": "o1", "amount": 6}))
    assert (one.kind, two.kind, two.dedup, charges) == ("ok", "duplicate", "key", ["o1"])


async def test_bad_call_is_refused() -> None:
    registry, _, _ = tools()
    with pytest.raises(Exception, match="non-empty string id"):
        await Dispatcher(registry).submit(Call("", "order", {"item": "x"}))
