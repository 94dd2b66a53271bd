"""What a long session remembers, in bytes: answers within ``CallPolicy.remembered_bytes``, each
ended call as one small record; a re-delivered id is never run again, even once its answer was
let go (``already_answered``).

The session here is the ledger and the dispatcher composed as the live session composes them
(calls decoded from JSON, answers drained, encoded and confirmed, a server message after each),
without sockets: memory is measured with ``tracemalloc`` over thousands of calls.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections import Counter
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from livebridge import Call, CallContext, CallPolicy, Dispatcher, ToolRegistry
from livebridge.calls.answered import ANSWER_OVERHEAD
from livebridge.calls.call import Outcome
from livebridge.calls.keys import RequestKeys
from livebridge.calls.ledger import FATES_KEPT, CallLedger
from livebridge.calls.lives import LiveCall
from livebridge.calls.repeats import PRUNE_ABOVE
from livebridge.errors import LedgerError
from livebridge.vendors.gemini import answers as gemini_live
from tests.support.hypothesis_profiles import examples

CALLS_PER_TURN = 8
CAP = 4096  # the ledger's history and the dispatcher's ids, by default
#: What one ended call may take, all told (its id, its entries in the ledger and in the
#: dispatcher): measured 124 bytes, generous; a payload is never part of it.
RECORD_BYTES = 160
#: What a tool that takes its ``CallContext`` adds per request: the request's idempotency key
#: is remembered, as a digest and its ordinal (``calls.keys``): measured 82 bytes.
KEY_BYTES = 100
#: The goal for a session at the cap with small results, answers kept included.
SESSION_BYTES = 1_000_000


def fetch_tools(size: int, *, by_id: bool = True) -> tuple[ToolRegistry, Counter[str]]:
    """One tool whose every result is ``size`` characters of text (0: a small object); runs
    are counted per call id, from its context (or all under ``"all"``, without a context)."""
    tools = ToolRegistry()
    runs: Counter[str] = Counter()

    def result(page: int) -> dict[str, Any]:
        return {"page": page, "text": str(page % 10) * size} if size else {"page": page}

    if by_id:

        @tools.tool
        async def fetch(page: int, context: CallContext) -> dict[str, Any]:
            """Fetch one page."""
            runs[context.call_id] += 1
            return result(page)

    else:

        @tools.tool(name="fetch")
        async def fetch_page(page: int) -> dict[str, Any]:
            """Fetch one page."""
            runs["all"] += 1
            return result(page)

    return tools, runs


class Session:
    """A live session's call path without sockets."""

    def __init__(self, tools: ToolRegistry, policy: CallPolicy | None = None) -> None:
        self.ledger = CallLedger(encode=gemini_live.encode)
        self.dispatcher = Dispatcher(tools, policy, answer_seen=self.ledger.answer_seen)
        self.now = 0.0

    async def turn(self, ids: list[str], first_page: int = 0) -> dict[str, dict[str, Any]]:
        """One ``toolCall`` with a call per id (pages from ``first_page`` on); returns each id's
        response as sent."""
        self.now += 1.0
        frame = [
            {"id": i, "name": "fetch", "args": {"page": first_page + n}} for n, i in enumerate(ids)
        ]
        decoded = msgspec.json.decode(msgspec.json.encode(frame))  # as the wire decoder does
        calls = [LiveCall(Call(c["id"], c["name"], c["args"])) for c in decoded]
        admitted = self.ledger.receive(calls, self.now)
        await self.dispatcher.run(admitted, on_settled=self.ledger.settle)
        sent: dict[str, dict[str, Any]] = {}
        while (message := self.ledger.drain(self.now)) is not None:
            self.ledger.sent(message, self.now)
            sent.update({r["id"]: r["response"] for r in message.function_responses})
        self.ledger.server_message()  # the answers were heard
        self.ledger.take_fates()
        self.ledger.take_notices()
        return sent


async def remembered_after(session: Session, turns: int, per_turn: int = CALLS_PER_TURN) -> int:
    """Bytes the session still holds after ``turns`` more turns (a warm-up turn first)."""
    await session.turn([f"warm-{i}" for i in range(CALLS_PER_TURN)])
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for turn in range(turns):  # each call a new request: its own arguments
            await session.turn([f"{turn}-{i}" for i in range(per_turn)], turn * per_turn)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


async def test_thousands_of_large_results_are_remembered_within_the_budget() -> None:
    """4,352 calls of 60 KB each (under ``max_result_bytes``): once ~250 MB kept for good."""
    tools, runs = fetch_tools(60_000, by_id=False)
    session = Session(tools)
    grown = await remembered_after(session, 4352 // CALLS_PER_TURN)
    budget = CallPolicy().remembered_bytes
    assert runs["all"] == 4352 + CALLS_PER_TURN
    assert session.dispatcher.remembered_bytes <= budget
    # Beside the records and the budget, the last requests keep their answers until the model
    # is known to have seen them and a sweep passes (``Requests``): a turn's worth.
    last = (PRUNE_ABOVE + 1) * 60_100
    assert grown <= budget + 4352 * RECORD_BYTES + last, f"{grown:,} bytes remembered"


async def test_small_results_at_the_cap_are_a_small_record_each() -> None:
    """The 4,096-call cap with small results, one call a turn (once ~1.2 KB a call): each
    ended call is a record of a few fields; answers fill at most the budget beside them."""
    tools, _ = fetch_tools(0, by_id=False)
    session = Session(tools)
    grown = await remembered_after(session, CAP, per_turn=1)
    budget = CallPolicy().remembered_bytes
    assert grown <= budget + CAP * RECORD_BYTES, f"{grown:,} bytes, {grown // CAP} a call"
    assert grown <= SESSION_BYTES


async def test_without_answers_kept_an_ended_call_is_its_record_alone() -> None:
    tools, _ = fetch_tools(0, by_id=False)
    session = Session(tools, CallPolicy(remembered_bytes=0))
    records = await remembered_after(session, CAP // CALLS_PER_TURN)
    assert records <= CAP * RECORD_BYTES, f"{records:,} bytes, {records // CAP} a call"


async def test_a_tool_that_takes_its_context_adds_its_request_key_alone() -> None:
    tools, _ = fetch_tools(0)
    session = Session(tools, CallPolicy(remembered_bytes=0))
    held = await remembered_after(session, CAP // CALLS_PER_TURN)
    assert held <= CAP * (RECORD_BYTES + KEY_BYTES), f"{held:,} bytes, {held // CAP} a call"


async def test_a_redelivered_id_whose_answer_was_let_go_is_not_run_again() -> None:
    tools, runs = fetch_tools(30_000)
    session = Session(tools, CallPolicy(remembered_bytes=100_000))
    first = await session.turn(["old"])
    for turn in range(3):  # 90 KB more: the oldest answer is let go
        await session.turn([f"new-{turn}"])
    again = await session.turn(["old", "new-2"])
    assert runs == {"old": 1, "new-0": 1, "new-1": 1, "new-2": 1}
    error = again["old"]["error"]
    assert error["type"] == "already_answered" and error["retryable"] is False
    assert error["duplicate_of"] == "old" and "not run again" in error["message"]
    assert again["new-2"]["output"] == {"page": 0, "text": "0" * 30_000}  # its first answer
    assert first["old"]["output"]["text"] == "0" * 30_000
    assert session.ledger.fates()[-1].call_id in {"old", "new-2"}


async def test_a_redelivery_without_any_budget_is_told_it_was_answered() -> None:
    tools, runs = fetch_tools(0)
    dispatcher = Dispatcher(tools, CallPolicy(remembered_bytes=0))
    (first,) = await dispatcher.run([Call("c1", "fetch", {"page": 1})])
    (again,) = await dispatcher.run([Call("c1", "fetch", {"page": 1})])
    assert first.kind == "ok" and dispatcher.answered("c1") is None
    assert again.kind == "duplicate" and again.response["error"]["type"] == "already_answered"
    assert runs == {"c1": 1} and dispatcher.remembered_bytes == 0


STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("new"), st.integers(0, 3_000)),
        st.tuples(st.just("again"), st.integers(0, 1_000)),
    ),
    max_size=40,
)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(budget=st.integers(0, 12_000), steps=STEPS)
async def test_budget_and_redelivery_hold_for_any_sequence(
    budget: int, steps: list[tuple[str, int]]
) -> None:
    """Never run twice; a re-delivery gets the original answer exactly while it is among the
    newest answers that fit the budget, else ``already_answered``; the budget is never passed."""
    tools, runs = fetch_tools(0)

    @tools.tool(name="sized")
    async def sized(size: int, context: CallContext) -> str:
        """A result of ``size`` characters."""
        runs[context.call_id] += 1
        return "y" * size

    dispatcher = Dispatcher(tools, CallPolicy(remembered_bytes=budget))
    answered: list[tuple[str, dict[str, Any], int]] = []  # id, response, charge: put order
    for step, value in steps:
        if step == "new" or not answered:
            call_id = f"c{len(answered)}"
            (outcome,) = await dispatcher.run([Call(call_id, "sized", {"size": value})])
            answered.append((call_id, outcome.response, outcome.result_bytes + ANSWER_OVERHEAD))
        else:
            call_id, response, _ = answered[value % len(answered)]
            (outcome,) = await dispatcher.run([Call(call_id, "sized", {"size": 0})])
            kept, total = set(), 0
            for kept_id, _, charged in reversed(answered):  # the newest that fit, together
                total += charged
                if total > budget:
                    break
                kept.add(kept_id)
            if call_id in kept:
                assert outcome.response == response
            else:
                assert outcome.response["error"]["type"] == "already_answered"
        assert dispatcher.remembered_bytes <= budget
        assert set(runs.values()) <= {1}


def test_an_old_call_is_judged_by_its_fate_once_its_record_is_let_go() -> None:
    """Past ``FATES_KEPT`` fates an ended call keeps no record of its own; late events about
    it are still judged as before, and name its id."""
    ledger = CallLedger(encode=gemini_live.encode)
    ledger.receive([LiveCall(Call("gone", "f", {}))], 0.0)
    ledger.cancel(["gone"], 0.0)
    ledger.settle(Outcome("gone", "f", "ok", {"output": 1}))  # after its cancel: dropped
    for i in range(FATES_KEPT + 1):
        ledger.receive([LiveCall(Call(f"c{i}", "f", {}))], 1.0)
        ledger.settle(Outcome(f"c{i}", "f", "ok", {"output": i}))
        message = ledger.drain(1.0)
        assert message is not None
        ledger.sent(message, 1.0)
        ledger.server_message()
        ledger.take_fates()
    assert len(ledger.fates()) == FATES_KEPT and ledger.fates()[0].call_id == "c1"
    ledger.take_notices()
    assert ledger.state("gone") == "cancelled" and ledger.state("c0") == "answered"
    assert ledger.answer_seen("c0") and not ledger.answer_seen("gone")
    ledger.cancel(["c0"], 2.0)
    with pytest.raises(LedgerError, match="call gone settled twice"):
        ledger.settle(Outcome("gone", "f", "ok", {"output": 1}))
    with pytest.raises(LedgerError, match="call c0 settled twice"):
        ledger.settle(Outcome("c0", "f", "ok", {"output": 1}))
    (late,) = ledger.take_notices()
    assert (late.kind, late.call_id) == ("late_cancel", "c0")
    assert ledger.receive([LiveCall(Call("c0", "f", {}))], 3.0)  # asked again: a new life


def test_request_keys_are_derived_again_for_a_retry_and_forgotten_a_quarter_at_a_time() -> None:
    keys = RequestKeys("conversation", capacity=8)
    first = keys.key("pay", b'{"amount":5}', 0, retry=False)
    assert keys.key("pay", b'{"amount":5}', 0, retry=True) == first  # the same request
    second = keys.key("pay", b'{"amount":5}', 0, retry=False)  # one more: ordinal 2
    assert second != first and keys.key("pay", b'{"amount":5}', 0, retry=True) == second
    assert keys.key("pay", b'{"amount":5}', 1, retry=False) != first  # a new epoch
    for i in range(10):  # past 8 + 2 the oldest go, down to 8
        keys.key("work", str(i).encode(), 1, retry=False)
    assert keys.key("pay", b'{"amount":5}', 0, retry=False) == first  # forgotten: ordinal 1


def test_a_connection_without_calls_makes_no_history() -> None:
    """Opening (and reopening) a connection orphans no call: it makes no history of fates (an
    empty deque is 760 bytes a session on 3.11, for sessions that may never call a tool)."""
    ledger = CallLedger(encode=gemini_live.encode)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        ledger.resumed(None, 0.0)
        ledger.disconnected()
        ledger.resumed(None, 1.0)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert ledger.fates() == []
    assert grown < 300, f"{grown} bytes"
