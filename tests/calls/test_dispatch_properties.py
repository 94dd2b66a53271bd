"""Property: any mix of calls gets exactly one answer each, in order, concurrently."""

from __future__ import annotations

import time
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from livebridge import Call, CallContext, CallPolicy, Dispatcher, ToolRegistry
from tests.support.hypothesis_profiles import examples
from tests.support.timing import seconds

HANG_TIMEOUT = 0.3
KINDS = ("fast", "slow", "fail", "hang", "unknown", "invalid", "twin", "idempotent")


def make_registry(runs: list[tuple[str, str, int]]) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool
    async def fast(i: int, context: CallContext) -> int:
        runs.append(("fast", context.call_id, i))
        return i

    @tools.tool
    async def slow(i: int, ms: int, context: CallContext) -> int:
        runs.append(("slow", context.call_id, i))
        await anyio.sleep(ms / 1000)
        return i

    @tools.tool
    async def fail(i: int, context: CallContext) -> None:
        runs.append(("fail", context.call_id, i))
        raise RuntimeError("boom")

    @tools.tool(timeout=HANG_TIMEOUT)
    async def hang(i: int, context: CallContext) -> None:
        runs.append(("hang", context.call_id, i))
        await anyio.Event().wait()

    @tools.tool(idempotent=True)
    async def idempotent(i: int, context: CallContext) -> int:
        runs.append(("idempotent", context.call_id, i))
        return i

    return tools


def build_calls(plan: list[tuple[str, int]]) -> tuple[list[Call], float]:
    """Calls for ``plan`` and the longest any of them should take (seconds)."""
    calls: list[Call] = []
    slowest = 0.0
    for n, (kind, ms) in enumerate(plan):
        call_id = f"id{n}"
        if kind == "twin" and calls:
            earlier = calls[ms % len(calls)]
            calls.append(Call(call_id, earlier.name, earlier.args))
        elif kind == "unknown":
            calls.append(Call(call_id, "missing"))
        elif kind == "invalid":
            calls.append(Call(call_id, "fast", {"i": "not a number"}))
        elif kind == "slow":
            calls.append(Call(call_id, "slow", {"i": n, "ms": ms}))
            slowest = max(slowest, ms / 1000)
        elif kind == "hang":
            calls.append(Call(call_id, "hang", {"i": n}))
            slowest = max(slowest, HANG_TIMEOUT)
        elif kind == "idempotent":
            calls.append(Call(call_id, "idempotent", {"i": ms % 2}))
        else:
            calls.append(Call(call_id, "fast" if kind == "twin" else kind, {"i": n}))
    return calls, slowest


plans = st.lists(
    st.tuples(st.sampled_from(KINDS), st.integers(min_value=20, max_value=250)),
    min_size=1,
    max_size=12,
)


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans)
def test_every_call_gets_exactly_one_answer(plan: list[tuple[str, int]]) -> None:
    runs: list[tuple[str, str, int]] = []
    calls, slowest = build_calls(plan)
    dispatcher = Dispatcher(make_registry(runs), CallPolicy(max_calls_per_turn=10))
    settled: list[str] = []

    async def main() -> tuple[list[Any], float]:
        started = time.monotonic()
        outcomes = await dispatcher.run(calls, on_settled=lambda o: settled.append(o.call_id))
        return outcomes, time.monotonic() - started

    outcomes, elapsed = anyio.run(main)

    assert [o.call_id for o in outcomes] == [c.id for c in calls]
    assert sorted(settled) == sorted(c.id for c in calls)  # each settled exactly once
    ran_ids = [call_id for _, call_id, _ in runs]
    assert len(ran_ids) == len(set(ran_ids))  # no request ran twice
    non_idempotent = [(name, i) for name, _, i in runs if name != "idempotent"]
    assert len(non_idempotent) == len(set(non_idempotent))  # identical requests ran once
    for index, (call, outcome) in enumerate(zip(calls, outcomes, strict=True)):
        assert ("output" in outcome.response) != ("error" in outcome.response)
        if call.name == "missing" and index < 10:
            assert outcome.response["error"]["type"] == "unknown_function"
        if call.name == "hang" and outcome.kind != "rejected":
            assert outcome.kind in ("timeout", "duplicate")
    assert [o.kind for o in outcomes[10:]] == ["rejected"] * len(outcomes[10:])
    # Concurrent, not sequential: about the slowest call, with a generous margin.
    assert elapsed < slowest + seconds(2.0)
