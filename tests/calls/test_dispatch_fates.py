"""Every call ``run()`` planned gets exactly one outcome, on every way out.

The caller cancels ``run()``; a handler ignores its cancellation; sync handlers outlive their
deadline; one call of a batch is malformed. Each ends in one fate, and limits hold throughout.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import anyio
from prometheus_client import CollectorRegistry

from livebridge import Call, CallPolicy, Dispatcher, Outcome, Recorder, ToolRegistry
from livebridge.calls.observers import CallSettled, CallStarted, Event
from livebridge.observe.metrics import PrometheusObserver
from tests.support.deep_nesting import TOO_DEEP_FOR_ANY_PYTHON
from tests.support.timing import seconds


class StartWatcher:
    """Sets ``ready`` once ``count`` handlers have started."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.ready = anyio.Event()

    def on_event(self, event: Event) -> None:
        if isinstance(event, CallStarted):
            self.count -= 1
            if self.count == 0:
                self.ready.set()


async def test_cancelled_run_settles_every_call_once_and_in_flight_returns_to_zero() -> None:
    tools = ToolRegistry()
    release_thread = threading.Event()

    @tools.tool
    async def wait_forever(n: int) -> None:
        await anyio.Event().wait()

    @tools.tool
    def block(n: int) -> str:
        release_thread.wait(10)
        return "late"

    @tools.tool
    async def quick() -> str:
        return "done"

    registry = CollectorRegistry()
    metrics, recorder, started = PrometheusObserver(registry), Recorder(), StartWatcher(3)
    dispatcher = Dispatcher(tools, observers=[metrics, recorder, started])
    settled: list[Outcome] = []
    calls = [
        Call("a", "wait_forever", {"n": 1}),
        Call("b", "wait_forever", {"n": 2}),
        Call("c", "block", {"n": 3}),
        Call("d", "quick"),
        Call("e", "wait_forever", {"n": 1}),  # a twin of "a": it waits for a's answer
    ]
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: dispatcher.run(calls, on_settled=settled.append))
        await started.ready.wait()
        assert registry.get_sample_value("livebridge_tool_calls_in_flight") == 3
        tg.cancel_scope.cancel()
    assert Counter(o.call_id for o in settled) == Counter("abcde")
    kinds = {o.call_id: o.kind for o in settled}
    assert kinds == {
        "a": "cancelled",
        "b": "cancelled",
        "c": "cancelled",
        "d": "ok",
        "e": "duplicate",
    }
    observed = Counter(e.call.id for e in recorder.of(CallSettled))
    assert observed == Counter("abcde")
    assert registry.get_sample_value("livebridge_tool_calls_in_flight") == 0
    release_thread.set()
    assert await dispatcher.aclose(5.0) == 0
    assert Counter(e.call.id for e in recorder.of(CallSettled)) == observed  # nothing late


async def test_a_handler_that_swallows_cancellation_is_answered_on_time_and_abandoned() -> None:
    tools = ToolRegistry()
    stop = threading.Event()
    runs: list[str] = []

    @tools.tool(timeout=0.2)
    async def stubborn() -> str:
        while not stop.is_set():
            try:
                await anyio.sleep(0.01)
            except anyio.get_cancelled_exc_class():
                pass  # the mistake under test
        return "finally"

    @tools.tool(timeout=0.3)
    async def quick(tag: str) -> str:
        runs.append(tag)
        return "done"

    dispatcher = Dispatcher(tools, CallPolicy(max_parallel=1))
    began = time.monotonic()
    outcomes = await dispatcher.run([Call("s", "stubborn"), Call("q", "quick", {"tag": "q"})])
    elapsed = time.monotonic() - began
    assert [o.kind for o in outcomes] == ["timeout", "timeout"]  # q never got the only slot
    assert "ignored its cancellation" in outcomes[0].response["error"]["message"]
    # the 0.2 s deadline + the abandon grace, with a generous margin
    assert elapsed < seconds(3.0), elapsed
    assert dispatcher.lingering == 1  # still tracked, still holding its slot:
    [blocked] = await dispatcher.run([Call("q2", "quick", {"tag": "q2"})])
    assert blocked.kind == "timeout" and runs == []
    stop.set()
    assert await dispatcher.aclose(5.0) == 0 and dispatcher.lingering == 0
    [freed] = await dispatcher.run([Call("q3", "quick", {"tag": "q3"})])
    assert freed.kind == "ok" and runs == ["q3"]


async def test_aclose_cancels_what_is_left_and_reports_what_would_not_stop() -> None:
    tools = ToolRegistry()
    stop = threading.Event()

    @tools.tool(timeout=0.1)
    async def stubborn() -> None:
        while not stop.is_set():
            try:
                await anyio.sleep(0.01)
            except anyio.get_cancelled_exc_class():
                pass

    dispatcher = Dispatcher(tools)
    [outcome] = await dispatcher.run([Call("s", "stubborn")])
    assert outcome.kind == "timeout"
    assert await dispatcher.aclose(0.0) == 1  # cancelled again, and ignored it again
    stop.set()
    assert await dispatcher.aclose(5.0) == 0


async def test_sync_handlers_never_exceed_max_parallel_even_when_they_time_out() -> None:
    tools = ToolRegistry()
    lock = threading.Lock()
    active = 0
    most = 0
    bodies = 0
    idle = threading.Event()

    @tools.tool(timeout=0.05)
    def slow(n: int) -> int:
        nonlocal active, most, bodies
        with lock:
            active += 1
            bodies += 1
            most = max(most, active)
            idle.clear()
        try:
            time.sleep(0.1)  # longer than the deadline: every body outlives its call
        finally:
            with lock:
                active -= 1
                if active == 0:
                    idle.set()
        return n

    dispatcher = Dispatcher(tools, CallPolicy(max_parallel=4, max_calls_per_turn=12))
    results: list[Outcome] = []

    async def batch(first: int) -> None:
        calls = [Call(f"c{n}", "slow", {"n": n}) for n in range(first, first + 12)]
        results.extend(await dispatcher.run(calls))

    async with anyio.create_task_group() as tg:
        for first in range(0, 120, 12):
            tg.start_soon(batch, first)
    assert len(results) == 120 and {o.kind for o in results} == {"timeout"}
    assert await anyio.to_thread.run_sync(idle.wait, 10.0)
    assert bodies >= 4 and most <= 4, (bodies, most)


async def test_a_cancelled_sync_handler_keeps_its_slot_until_its_thread_returns() -> None:
    tools = ToolRegistry()
    release = threading.Event()
    entered = threading.Event()

    @tools.tool
    def hold() -> str:
        entered.set()
        release.wait(10)
        return "held"

    @tools.tool(timeout=0.2)
    async def quick() -> str:
        return "done"

    dispatcher = Dispatcher(tools, CallPolicy(max_parallel=1))
    results: dict[str, Outcome] = {}

    async def run(call: Call) -> None:
        [results[call.id]] = await dispatcher.run([call])

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, Call("h", "hold"))
        await anyio.to_thread.run_sync(entered.wait, 10.0)
        assert dispatcher.cancel("h")
    assert results["h"].kind == "cancelled"
    await run(Call("q", "quick"))
    assert results["q"].kind == "timeout"  # the thread still holds the only slot
    release.set()
    # The thread gives its slot back through the event loop; a call then gets it.
    with anyio.fail_after(seconds(10)):
        while True:
            await run(Call(f"q{len(results)}", "quick"))
            if results[f"q{len(results) - 1}"].kind == "ok":
                break


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


async def test_one_malformed_call_never_sinks_its_siblings() -> None:
    tools = ToolRegistry()

    @tools.tool
    async def echo(value: Any = None) -> Any:
        return "echoed"

    deep = {"value": nested(TOO_DEEP_FOR_ANY_PYTHON)}
    deeper = {"value": nested(200_000)}
    calls = [
        Call("list", "echo", [1, 2]),
        Call("text", "echo", "value=1"),
        Call("number", "echo", 7),
        Call("null", "echo", None),
        Call("deep", "echo", deep),
        Call("deeper", "echo", deeper),
        Call("name", 42, {}),  # type: ignore[arg-type]
        Call("fine", "echo", {"value": 1}),
    ]
    outcomes = await Dispatcher(tools, CallPolicy(max_calls_per_turn=16)).run(calls)
    by_id = {o.call_id: o for o in outcomes}
    assert by_id["fine"].kind == "ok" and by_id["fine"].response == {"output": "echoed"}
    for call_id, named in [("list", "list"), ("text", "str"), ("number", "int"), ("null", "null")]:
        error = by_id[call_id].response["error"]
        assert by_id[call_id].kind == "rejected" and error["type"] == "invalid_arguments"
        assert f"arguments must be a JSON object, not {named}" in error["message"]
    for call_id in ("deep", "deeper"):
        error = by_id[call_id].response["error"]
        assert by_id[call_id].kind == "rejected" and error["type"] == "invalid_arguments"
        assert "nested too deeply" in error["message"]
    assert by_id["name"].kind == "rejected"
    assert by_id["name"].response["error"]["type"] == "unknown_function"


async def test_a_nan_result_is_answered_as_unserializable() -> None:
    tools = ToolRegistry()

    @tools.tool
    async def ratio() -> float:
        return float("nan")

    [outcome] = await Dispatcher(tools).run([Call("r", "ratio")])
    assert outcome.kind == "error"
    assert outcome.response["error"]["type"] == "unserializable_result"


async def test_a_call_timing_out_while_it_waits_for_a_slot_gives_back_the_ones_it_held() -> None:
    """A tool's own limit is taken before the session's: a call that has the first and waits
    for the second is answered timeout at its deadline, and the first is free again."""
    tools = ToolRegistry()
    release = anyio.Event()

    @tools.tool
    async def hold() -> str:
        await release.wait()
        return "held"

    @tools.tool(max_concurrency=1, timeout=0.05)
    async def work(i: int) -> int:
        return i

    limiter = tools.get("work").limiter  # type: ignore[union-attr]
    assert limiter is not None
    dispatcher = Dispatcher(tools, CallPolicy(max_parallel=1, timeout=30))
    holding = dispatcher.start([Call("h", "hold", {})])  # takes the session's only slot
    assert not isinstance(holding, list)
    waited = await dispatcher.run([Call("w1", "work", {"i": 1})])
    assert waited[0].kind == "timeout"
    assert limiter.borrowed_tokens == 0  # the tool's slot it held while waiting is given back
    release.set()
    assert (await holding)[0].response == {"output": "held"}
    again = await dispatcher.run([Call("w2", "work", {"i": 2})])
    assert again[0].kind == "ok" and again[0].response == {"output": 2}
