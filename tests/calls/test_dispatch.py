"""One test per row of the contract table (DESIGN.md), then limits, streaming and bad input."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from livebridge import (
    Call,
    CallContext,
    CallPolicy,
    Dispatcher,
    Outcome,
    Partial,
    Recorder,
    Result,
    ToolError,
    ToolRegistry,
)
from livebridge.calls.observers import BatchSettled, BatchStarted, CallSettled, CallStarted
from tests.support.timing import seconds


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def registry() -> tuple[ToolRegistry, dict[str, int]]:
    tools = ToolRegistry()
    runs: dict[str, int] = {}

    @tools.tool
    async def add(a: int, b: int = 1) -> int:
        runs["add"] = runs.get("add", 0) + 1
        return a + b

    @tools.tool(idempotent=True)
    async def lookup(key: str) -> str:
        runs["lookup"] = runs.get("lookup", 0) + 1
        return key.upper()

    @tools.tool
    async def secret_failure() -> None:
        raise ValueError("database password is hunter2")

    @tools.tool(expose_errors=True)
    async def open_failure() -> None:
        raise KeyError("no such row")

    @tools.tool
    async def refuse() -> None:
        raise ToolError("the table is already booked", retryable=True)

    @tools.tool(timeout=0.05)
    async def hang() -> None:
        await anyio.Event().wait()

    return tools, runs


async def run_one(dispatcher: Dispatcher, name: str, args: Any = None) -> Outcome:
    [outcome] = await dispatcher.run([Call("c1", name, {} if args is None else args)])
    return outcome


# -- the contract table -------------------------------------------------------------------


async def test_returned_value_is_output() -> None:
    tools, _ = registry()
    outcome = await run_one(Dispatcher(tools), "add", {"a": 2})
    assert (outcome.kind, outcome.response) == ("ok", {"output": 3})
    assert outcome.call_id == "c1" and outcome.name == "add"
    assert outcome.result_bytes == len(b'{"output":3}')
    assert outcome.latency >= 0


async def test_raised_error_hides_its_text_and_logs_the_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tools, _ = registry()
    with caplog.at_level(logging.ERROR, logger="livebridge.calls.dispatch"):
        outcome = await run_one(Dispatcher(tools), "secret_failure")
    assert outcome.kind == "error"
    error = outcome.response["error"]
    assert error["type"] == "ValueError" and error["retryable"] is False
    assert "hunter2" not in error["message"] and "server log" in error["message"]
    assert "Traceback" not in str(outcome.response)
    assert any(r.exc_info and "hunter2" in str(r.exc_info[1]) for r in caplog.records)


async def test_raised_error_text_shown_when_the_tool_allows_it() -> None:
    tools, _ = registry()
    outcome = await run_one(Dispatcher(tools), "open_failure")
    assert outcome.response == {
        "error": {"type": "KeyError", "message": "'no such row'", "retryable": False}
    }


async def test_tool_error_message_is_sent() -> None:
    tools, _ = registry()
    outcome = await run_one(Dispatcher(tools), "refuse")
    assert outcome.kind == "error"
    assert outcome.response == {
        "error": {"type": "tool_error", "message": "the table is already booked", "retryable": True}
    }


async def test_timeout() -> None:
    tools, _ = registry()
    outcome = await run_one(Dispatcher(tools, CallPolicy(timeout=60)), "hang")
    assert outcome.kind == "timeout"
    assert outcome.response["error"]["type"] == "timeout"
    assert outcome.response["error"]["retryable"] is True
    assert "0.05" in outcome.response["error"]["message"]


async def test_policy_timeout_applies_without_a_tool_timeout() -> None:
    tools = ToolRegistry()

    @tools.tool
    async def wait_forever() -> None:
        await anyio.Event().wait()

    outcome = await run_one(Dispatcher(tools, CallPolicy(timeout=0.05)), "wait_forever")
    assert outcome.kind == "timeout"


async def test_unknown_function_lists_the_available_ones() -> None:
    tools, _ = registry()
    recorder = Recorder()
    outcome = await run_one(Dispatcher(tools, observers=[recorder]), "ad")
    assert outcome.kind == "rejected"
    error = outcome.response["error"]
    assert error["type"] == "unknown_function"
    assert error["message"].endswith("available: " + ", ".join(tools.names()))
    [settled] = recorder.of(CallSettled)
    assert settled.known_function is False
    assert recorder.of(CallStarted) == []


@pytest.mark.parametrize(
    ("args", "where"),
    [
        ({"a": "two"}, "$.a"),
        ({}, "a"),
        ({"a": 1, "c": 2}, "c"),
        ([1, 2], "object"),
        ("x", "object"),
    ],
)
async def test_invalid_arguments_do_not_run_the_handler(args: Any, where: str) -> None:
    tools, runs = registry()
    outcome = await run_one(Dispatcher(tools), "add", args)
    assert outcome.kind == "rejected"
    assert outcome.response["error"]["type"] == "invalid_arguments"
    assert where in outcome.response["error"]["message"]
    assert runs == {}


async def test_fanout_limit() -> None:
    tools, runs = registry()
    calls = [Call(f"c{i}", "add", {"a": i}) for i in range(5)]
    outcomes = await Dispatcher(tools, CallPolicy(max_calls_per_turn=3)).run(calls)
    assert [o.kind for o in outcomes] == ["ok", "ok", "ok", "rejected", "rejected"]
    assert outcomes[4].response["error"]["type"] == "fanout_limit"
    assert runs["add"] == 3


async def test_identical_call_of_a_non_idempotent_tool_runs_once() -> None:
    tools, runs = registry()
    calls = [Call("c1", "add", {"a": 1}), Call("c2", "add", {"b": 1, "a": 1})]
    first, twin = await Dispatcher(tools).run(calls)
    assert first.kind == "ok" and runs["add"] == 1
    assert twin.kind == "duplicate" and twin.duplicate_of == "c1"
    assert twin.response["error"]["type"] == "duplicate_call"
    assert twin.response["error"]["duplicate_of"] == "c1"


async def test_identical_call_of_an_idempotent_tool_shares_the_result() -> None:
    tools, runs = registry()
    calls = [Call("c1", "lookup", {"key": "k"}), Call("c2", "lookup", {"key": "k"})]
    first, twin = await Dispatcher(tools).run(calls)
    assert runs["lookup"] == 1
    assert first.response == twin.response == {"output": "K"}
    assert twin.kind == "ok" and twin.call_id == "c2" and twin.duplicate_of == "c1"


async def test_truncation() -> None:
    tools = ToolRegistry()

    @tools.tool
    async def big() -> str:
        return "z" * 10_000

    outcome = await run_one(Dispatcher(tools, CallPolicy(max_result_bytes=1000)), "big")
    assert outcome.kind == "ok" and outcome.truncated
    assert outcome.original_bytes == outcome.response["original_bytes"] == 10_000 + 13
    assert outcome.response["truncated"] is True
    assert 900 < outcome.result_bytes <= 1000


async def test_reissued_id_gets_the_cached_answer() -> None:
    tools, runs = registry()
    dispatcher = Dispatcher(tools)
    [first] = await dispatcher.run([Call("c1", "add", {"a": 1})])
    [again] = await dispatcher.run([Call("c1", "add", {"a": 1})])
    assert again is first and runs["add"] == 1
    assert dispatcher.answered("c1") is first


async def test_cancel_by_id() -> None:
    tools = ToolRegistry()
    started = anyio.Event()

    @tools.tool
    async def slow() -> None:
        started.set()
        await anyio.Event().wait()

    dispatcher = Dispatcher(tools)
    outcomes: list[Outcome] = []

    async def run() -> None:
        outcomes.extend(await dispatcher.run([Call("c1", "slow"), Call("c2", "add_missing")]))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await started.wait()
        assert dispatcher.cancel("c1") is True
    assert [o.kind for o in outcomes] == ["cancelled", "rejected"]
    assert dispatcher.cancel("c1") is False
    assert dispatcher.cancel("never-seen") is False


# -- across batches -----------------------------------------------------------------------


async def test_identical_call_whose_answer_was_not_seen_is_a_reissue() -> None:
    tools, runs = registry()
    seen: set[str] = set()
    dispatcher = Dispatcher(tools, answer_seen=seen.__contains__)
    [first] = await dispatcher.run([Call("c1", "add", {"a": 1})])
    [second] = await dispatcher.run([Call("c2", "add", {"a": 1})], turn=1)
    assert runs["add"] == 1
    assert second.kind == "duplicate" and second.duplicate_of == "c1"
    assert second.dedup == "reissue"
    assert second.response == first.response == {"output": 2}
    seen.add("c2")  # the model saw the re-issue's answer: asking again is a new request
    [third] = await dispatcher.run([Call("c3", "add", {"a": 1})], turn=2)
    assert third.kind == "ok" and runs["add"] == 2


async def test_identical_call_after_a_seen_answer_is_a_new_request() -> None:
    tools, runs = registry()
    dispatcher = Dispatcher(tools)  # no connection to know about: settled answers are seen
    await dispatcher.run([Call("c1", "add", {"a": 1})])
    [again] = await dispatcher.run([Call("c2", "add", {"a": 1})], turn=1)
    assert again.kind == "ok" and again.dedup is None and runs["add"] == 2


async def test_a_failure_is_never_served_to_a_later_request() -> None:
    tools = ToolRegistry()
    attempts: list[int] = []

    @tools.tool
    async def flaky() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise ToolError("try again", retryable=True)
        return "done"

    dispatcher = Dispatcher(tools, answer_seen=lambda call_id: False)
    [first] = await dispatcher.run([Call("c1", "flaky")])
    [retry] = await dispatcher.run([Call("c2", "flaky")], turn=1)
    assert (first.kind, retry.kind, len(attempts)) == ("error", "ok", 2)


async def test_later_twin_waits_for_a_running_first_call() -> None:
    tools = ToolRegistry()
    release = anyio.Event()
    runs: list[str] = []

    @tools.tool
    async def charge(amount: int, context: CallContext) -> str:
        runs.append(context.call_id)
        await release.wait()
        return "charged"

    planned = [anyio.Event() for _ in range(3)]

    class PlanWatcher:
        """Sets ``planned[n]`` once the n-th batch is planned (planning follows BatchStarted)."""

        def __init__(self) -> None:
            self.batches = 0

        def on_event(self, event: object) -> None:
            if isinstance(event, BatchStarted):
                planned[self.batches].set()
                self.batches += 1

    dispatcher = Dispatcher(tools, observers=[PlanWatcher()])
    results: dict[str, Outcome] = {}

    async def run(call_id: str) -> None:
        [results[call_id]] = await dispatcher.run([Call(call_id, "charge", {"amount": 5})])

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "c1")
        await planned[0].wait()
        tg.start_soon(run, "c2")
        tg.start_soon(run, "c1")  # the same id again while it runs
        await planned[2].wait()
        await planned[1].wait()
        release.set()
    assert runs == ["c1"]
    assert results["c2"].kind == "duplicate" and results["c2"].response == {"output": "charged"}
    assert results["c1"].kind == "ok"


async def test_ledger_is_bounded() -> None:
    tools, runs = registry()
    dispatcher = Dispatcher(tools, ledger_size=2)
    for i in range(3):
        await dispatcher.run([Call(f"c{i}", "add", {"a": i})])
    assert dispatcher.answered("c0") is None and dispatcher.answered("c2") is not None
    await dispatcher.run([Call("c0", "add", {"a": 0})])
    assert runs["add"] == 4


# -- concurrency and limits ---------------------------------------------------------------


async def test_calls_run_concurrently_and_a_slow_one_does_not_delay_the_others() -> None:
    tools = ToolRegistry()
    arrived: dict[str, anyio.Event] = {"a": anyio.Event(), "b": anyio.Event()}

    @tools.tool(idempotent=True)
    async def meet(me: str, other: str) -> str:
        arrived[me].set()
        await arrived[other].wait()  # deadlocks unless both run at the same time
        return me

    @tools.tool(timeout=0.2)
    async def slow() -> None:
        await anyio.Event().wait()

    calls = [Call("s", "slow"), Call("a", "meet", {"me": "a", "other": "b"})]
    calls.append(Call("b", "meet", {"me": "b", "other": "a"}))
    settled: list[str] = []
    outcomes = await Dispatcher(tools).run(calls, on_settled=lambda o: settled.append(o.call_id))
    assert [o.kind for o in outcomes] == ["timeout", "ok", "ok"]
    assert settled[-1] == "s"  # the fast ones were answered before the slow one settled


async def test_max_parallel_and_per_tool_limits() -> None:
    tools = ToolRegistry()
    active = {"now": 0, "peak": 0}
    gate = anyio.Event()

    @tools.tool(idempotent=True, max_concurrency=2)
    async def work(i: int) -> int:
        active["now"] += 1
        active["peak"] = max(active["peak"], active["now"])
        if active["peak"] == 2:
            gate.set()
        await gate.wait()
        await anyio.lowlevel.checkpoint()
        active["now"] -= 1
        return i

    calls = [Call(f"c{i}", "work", {"i": i}) for i in range(6)]
    outcomes = await Dispatcher(tools, CallPolicy(max_parallel=8)).run(calls)
    assert [o.response["output"] for o in outcomes] == list(range(6))
    assert active["peak"] == 2

    active["peak"] = 0
    shared = anyio.CapacityLimiter(1)
    dispatchers = [Dispatcher(tools, CallPolicy(limiter=shared)) for _ in range(2)]
    async with anyio.create_task_group() as tg:
        for n, dispatcher in enumerate(dispatchers):
            tg.start_soon(dispatcher.run, [Call(f"d{n}", "work", {"i": n})])
    assert active["peak"] == 1


async def test_sync_handlers_run_in_worker_threads() -> None:
    tools = ToolRegistry()

    @tools.tool
    def thread_name(context: CallContext) -> str:
        return f"{context.function}:{threading.current_thread() is threading.main_thread()}"

    outcome = await run_one(Dispatcher(tools), "thread_name")
    assert outcome.response == {"output": "thread_name:False"}


async def test_call_context_and_result_scheduling() -> None:
    tools = ToolRegistry()

    @tools.tool(behavior="NON_BLOCKING", scheduling="WHEN_IDLE")
    async def notify(context: CallContext, urgent: bool) -> Result | str:
        text = f"{context.call_id}/{context.turn}/{context.session_id}"
        return Result(text, scheduling="INTERRUPT") if urgent else text

    dispatcher = Dispatcher(tools, session_id="s1")
    calls = [Call("c1", "notify", {"urgent": True}), Call("c2", "notify", {"urgent": False})]
    urgent, calm = await dispatcher.run(calls, turn=4)
    assert urgent.response == {"output": "c1/4/s1"} and urgent.scheduling == "INTERRUPT"
    assert calm.scheduling == "WHEN_IDLE"


async def test_unserializable_result_is_an_error() -> None:
    tools = ToolRegistry()

    @tools.tool
    async def weird() -> object:
        return object()

    outcome = await run_one(Dispatcher(tools), "weird")
    assert outcome.kind == "error"
    assert outcome.response["error"]["type"] == "unserializable_result"


# -- streaming ----------------------------------------------------------------------------


def streaming_registry() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(behavior="NON_BLOCKING", scheduling="SILENT")
    async def count(n: int) -> AsyncIterator[int | Result]:
        for i in range(n - 1):
            yield i
        yield Result(n - 1, scheduling="INTERRUPT")

    return tools


async def test_stream_items_become_partials() -> None:
    partials: list[Partial] = []
    [end] = await Dispatcher(streaming_registry()).run(
        [Call("c1", "count", {"n": 3})], on_partial=partials.append
    )
    assert [p.response for p in partials] == [{"output": 0}, {"output": 1}, {"output": 2}]
    assert [p.scheduling for p in partials] == ["SILENT", "SILENT", "INTERRUPT"]
    assert {p.call_id for p in partials} == {"c1"}
    assert (end.kind, end.response) == ("ok", {})
    # What the call weighed is what was sent for it: its items, not the empty end.
    sent = sum(len(json.dumps(p.response, separators=(",", ":"))) for p in partials)
    assert (end.result_bytes, end.truncated) == (sent, False)


async def test_a_streamed_item_cut_to_size_marks_the_call_truncated() -> None:
    tools = ToolRegistry()

    @tools.tool(behavior="NON_BLOCKING")
    async def pages() -> AsyncIterator[str]:
        yield "short"
        yield "x" * 5000

    dispatcher = Dispatcher(tools, CallPolicy(max_result_bytes=1000))
    partials: list[Partial] = []
    [end] = await dispatcher.run([Call("c1", "pages", {})], on_partial=partials.append)
    assert end.truncated and 1000 < end.result_bytes <= 1000 + 20


async def test_stream_items_are_collected_without_on_partial() -> None:
    [outcome] = await Dispatcher(streaming_registry()).run([Call("c1", "count", {"n": 3})])
    assert outcome.response == {"output": [0, 1, 2]}


# -- observers ----------------------------------------------------------------------------


async def test_lifecycle_events() -> None:
    tools, _ = registry()
    recorder = Recorder()
    dispatcher = Dispatcher(tools, observers=[recorder], session_id="s")
    calls = [Call("c1", "add", {"a": 1}), Call("c2", "nope"), Call("c3", "add", {"a": "x"})]
    await dispatcher.run(calls, turn=2)
    assert recorder.of(BatchStarted) == [BatchStarted("s", 2, 3)]
    [batch] = recorder.of(BatchSettled)
    assert batch.size == 3 and batch.duration >= 0
    assert [e.call.id for e in recorder.of(CallStarted)] == ["c1"]
    settled = {e.call.id: e for e in recorder.of(CallSettled)}
    assert {k: e.outcome.kind for k, e in settled.items()} == {
        "c1": "ok",
        "c2": "rejected",
        "c3": "rejected",
    }
    assert settled["c2"].known_function is False and settled["c3"].known_function is True


async def test_failing_callbacks_do_not_lose_answers(caplog: pytest.LogCaptureFixture) -> None:
    tools, _ = registry()

    def broken(outcome: Outcome) -> None:
        raise RuntimeError("callback bug")

    with caplog.at_level(logging.ERROR):
        [outcome] = await Dispatcher(tools).run([Call("c1", "add", {"a": 1})], on_settled=broken)
    assert outcome.kind == "ok"
    assert "callback" in caplog.text


# -- bad input ----------------------------------------------------------------------------


async def test_empty_batch() -> None:
    tools, _ = registry()
    assert await Dispatcher(tools).run([]) == []


@pytest.mark.parametrize("bad_id", ["", None, 7])
async def test_missing_or_non_string_id_is_a_value_error(bad_id: Any) -> None:
    tools, runs = registry()
    calls = [Call("ok", "add", {"a": 1}), Call(bad_id, "add", {"a": 2})]
    with pytest.raises(ValueError, match=r"calls\[1\].*non-empty string id"):
        await Dispatcher(tools).run(calls)
    assert runs == {}


async def test_non_call_items_are_a_value_error() -> None:
    tools, _ = registry()
    with pytest.raises(ValueError, match=r"not a livebridge\.Call"):
        await Dispatcher(tools).run([{"id": "c1", "name": "add"}])  # type: ignore[list-item]


@pytest.mark.parametrize("name", [None, 3, ["add"]])
async def test_non_string_name_is_rejected(name: Any) -> None:
    tools, _ = registry()
    outcome = await run_one(Dispatcher(tools), name)
    assert outcome.kind == "rejected"
    assert outcome.response["error"]["type"] == "unknown_function"
    assert "not a string" in outcome.response["error"]["message"]


async def test_huge_and_deep_arguments_are_answered() -> None:
    tools, runs = registry()
    dispatcher = Dispatcher(tools)
    huge = {"a": 1, "b": 2, **{f"k{i}": "v" * 100 for i in range(20_000)}}
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    calls = [Call("c1", "add", huge), Call("c2", "add", {"a": deep}), Call("c3", "add", {"a": 1})]
    with anyio.fail_after(seconds(30)):
        outcomes = await dispatcher.run(calls)
    assert [o.kind for o in outcomes] == ["rejected", "rejected", "ok"]
    assert runs["add"] == 1


def test_policy_validation() -> None:
    with pytest.raises(ValueError):
        CallPolicy(max_parallel=0)
    with pytest.raises(ValueError):
        CallPolicy(timeout=0)
    with pytest.raises(ValueError):
        CallPolicy(max_result_bytes=10)
    with pytest.raises(ValueError):
        CallPolicy(idempotency_ttl=-1)
    with pytest.raises(ValueError):
        CallPolicy(max_result_bytes=65_536, max_frame_bytes=65_536)
