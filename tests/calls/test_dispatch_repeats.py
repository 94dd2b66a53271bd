"""Re-issue or new request: the pure rule, the idempotency key, and random conversations.

The hypothesis test drives a real ``Dispatcher`` wired to a real ``CallLedger`` (as a session
wires them) through random sequences of calls, sends, acknowledgements, failures and
reconnects, and checks every call against a reference model of the rule in docs/contract.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from livebridge import Call, CallContext, CallPolicy, Dispatcher, ToolError, ToolRegistry
from livebridge.calls.endings import OutcomeKind
from livebridge.calls.ledger import CallLedger
from livebridge.calls.lives import LiveCall
from livebridge.calls.repeats import (
    MAX_IDS_PER_REQUEST,
    PRUNE_ABOVE,
    RETRY_WINDOW,
    Repeat,
    Requests,
    classify,
    served_by_key,
)
from livebridge.vendors.gemini import answers as gemini_live
from tests.support.hypothesis_profiles import examples


@pytest.mark.parametrize(
    ("first", "seen", "expected"),
    [
        (None, False, "reissue"),  # the first call is still running
        (None, True, "reissue"),
        ("ok", False, "reissue"),  # answered, but the model could not have seen it
        ("ok", True, "new"),  # "and one more coffee"
        ("duplicate", False, "reissue"),
        ("duplicate", True, "new"),
        ("error", False, "new"),  # a failure is never served to a later request
        ("timeout", False, "new"),
        ("cancelled", False, "new"),
        ("rejected", False, "new"),
        ("error", True, "new"),
    ],
)
def test_classify(first: OutcomeKind | None, seen: bool, expected: Repeat) -> None:
    assert classify(first, seen=seen) == expected


@pytest.mark.parametrize(
    ("first", "age", "expected"),
    [
        (None, 1.0, True),  # still running: wait for it
        ("ok", 1.0, True),
        ("ok", 59.9, True),
        ("ok", 60.0, False),  # the key expired
        ("error", 1.0, False),  # only a successful result is served
        ("timeout", 1.0, False),
        ("cancelled", 1.0, False),
    ],
)
def test_served_by_key(first: OutcomeKind | None, age: float, expected: bool) -> None:
    assert served_by_key(first, age=age, ttl=60.0) is expected


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_idempotency_key_makes_one_request_across_turns_and_only_of_a_success() -> None:
    tools = ToolRegistry()
    charges: list[str] = []
    fail_next = [True]

    @tools.tool(idempotency_key=lambda args: args["order"])
    async def charge(order: str, amount: int) -> str:
        charges.append(order)
        if fail_next[0]:
            fail_next[0] = False
            raise ToolError("card declined, try again", retryable=True)
        return f"charged {order}"

    clock = Clock()
    policy = CallPolicy(idempotency_ttl=60.0)
    dispatcher = Dispatcher(tools, policy, clock=clock)  # every answer counts as seen
    [failed] = await dispatcher.run([Call("c1", "charge", {"order": "A1", "amount": 5})])
    [first] = await dispatcher.run([Call("c2", "charge", {"order": "A1", "amount": 5})])
    clock.now = 30.0  # other arguments, same key: the same charge
    [again] = await dispatcher.run([Call("c3", "charge", {"order": "A1", "amount": 7})])
    assert (failed.kind, first.kind, again.kind) == ("error", "ok", "duplicate")
    assert again.dedup == "key" and again.duplicate_of == "c2"
    assert again.response == first.response and charges == ["A1", "A1"]
    clock.now = 100.0  # the key expired: a new charge
    [later] = await dispatcher.run([Call("c4", "charge", {"order": "A1", "amount": 5})])
    assert later.kind == "ok" and charges == ["A1", "A1", "A1"]


async def test_idempotency_key_that_raises_rejects_only_its_call() -> None:
    tools = ToolRegistry()

    @tools.tool(idempotency_key=lambda args: args["missing"])
    async def charge(order: str) -> str:
        return order

    @tools.tool
    async def ping() -> str:
        return "pong"

    outcomes = await Dispatcher(tools).run(
        [Call("c1", "charge", {"order": "A"}), Call("c2", "ping")]
    )
    assert [o.kind for o in outcomes] == ["rejected", "ok"]
    assert "KeyError" in outcomes[0].response["error"]["message"]


async def test_idempotency_cache_is_bounded() -> None:
    tools = ToolRegistry()
    runs: list[str] = []

    @tools.tool(idempotency_key=lambda args: args["order"])
    async def charge(order: str) -> str:
        runs.append(order)
        return order

    dispatcher = Dispatcher(tools, CallPolicy(idempotency_cache=2), ledger_size=2)
    for i, order in enumerate(["A", "B", "C", "A"]):
        await dispatcher.run([Call(f"c{i}", "charge", {"order": order})])
    assert runs == ["A", "B", "C", "A"]  # "A" was forgotten when "C" came: it ran again


def test_requests_forget_stale_ones_and_stay_small() -> None:
    """Seen answers are forgotten once more than ``PRUNE_ABOVE`` are kept; one request that
    still matters is kept, and holds none of the stale ones after it (each pins its answer)."""
    stale: set[int] = set()
    requests: Requests[int] = Requests(4096, lambda request: request.first in stale)
    for i in range(1000):
        requests.put(("work", i), i, f"c{i}", float(i))
        stale.add(i)  # its answer was seen at once
        assert len(requests) <= PRUNE_ABOVE + 1
    stale.discard(1000)
    requests.put(("work", 1000), 1000, "c1000", 1000.0)  # still running
    for i in range(1001, 1200):
        requests.put(("work", i), i, f"c{i}", float(i))
        stale.add(i)
        assert len(requests) <= PRUNE_ABOVE + 2  # the running one, and the newest stale ones
    assert requests.get(("work", 1000)) is not None
    stale.add(1000)
    for i in range(1200, 1200 + PRUNE_ABOVE + 1):
        requests.put(("work", i), i, f"c{i}", float(i))
        stale.add(i)
    assert requests.get(("work", 1000)) is None and len(requests) <= PRUNE_ABOVE + 1


def test_a_sweep_spares_a_failed_request_among_the_newest_for_its_retry() -> None:
    """A failed request is stale, but its retry still looks it up (to keep its idempotency
    key): sweeps spare it while it is among the newest ``RETRY_WINDOW`` requests kept."""
    failed: set[int] = {0}
    requests: Requests[int] = Requests(4096, lambda request: True, lambda r: r.first in failed)
    requests.put(("pay", 0), 0, "c0", 0.0)
    for i in range(1, 200):  # seen answers: swept
        requests.put(("work", i), i, f"c{i}", float(i))
    assert requests.get(("pay", 0)) is not None and len(requests) <= PRUNE_ABOVE + 2
    for i in range(200, 300):  # failures: the newest of them are spared
        failed.add(i)
        requests.put(("pay", i), i, f"c{i}", float(i))
    assert requests.get(("pay", 0)) is None and requests.get(("pay", 299)) is not None
    assert len(requests) <= 2 * RETRY_WINDOW + 1


# -- random conversations against a reference model ----------------------------------------

Step = tuple[str, int, bool]  # (what, which arguments, the handler fails)

steps = st.lists(
    st.one_of(
        st.tuples(st.just("call"), st.integers(0, 1), st.booleans()),
        st.tuples(st.just("twins"), st.integers(0, 1), st.booleans()),
        st.tuples(st.sampled_from(["send", "ack", "reconnect"]), st.just(0), st.just(False)),
    ),
    max_size=30,
)


@dataclass
class Model:
    """The contract's rule, written as plainly as possible."""

    connection: int = 0
    sent_on: dict[str, int] = field(default_factory=dict)  # answered ids -> connection
    unsent: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    requests: dict[int, tuple[bool, list[str]]] = field(default_factory=dict)  # failed, ids

    def call(self, call_id: str, key: int, fails: bool) -> bool:
        """Returns whether the handler runs."""
        earlier = self.requests.get(key)
        self.unsent.append(call_id)
        if earlier is not None:
            failed, ids = earlier
            if not failed and not any(i in self.seen for i in ids):
                ids.append(call_id)
                del ids[:-MAX_IDS_PER_REQUEST]
                return False
        self.requests[key] = (fails, [call_id])
        return True

    def send(self) -> None:
        for call_id in self.unsent:
            self.sent_on[call_id] = self.connection
        self.unsent = []

    def ack(self) -> None:
        self.seen |= {i for i, c in self.sent_on.items() if c == self.connection}

    def reconnect(self) -> None:
        self.unsent = []  # orphaned: never sent
        self.connection += 1


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
def test_random_conversations_follow_the_rule(script: list[Step]) -> None:
    anyio.run(_conversation, script)


async def _conversation(script: list[Step]) -> None:
    tools = ToolRegistry()
    runs: list[str] = []

    @tools.tool
    async def add_coffee(size: int, fail: bool, context: CallContext) -> str:
        runs.append(context.call_id)
        if fail:
            raise ToolError("the machine is busy", retryable=True)
        return f"coffee {size} added"

    ledger = CallLedger(encode=gemini_live.encode)
    dispatcher = Dispatcher(tools, answer_seen=ledger.answer_seen)
    model = Model()
    ids = iter(f"c{n}" for n in range(1000))
    expected_runs: list[str] = []
    for what, key, fails in script:
        if what in ("call", "twins"):
            count = 2 if what == "twins" else 1
            calls = [
                Call(next(ids), "add_coffee", {"size": key, "fail": fails}) for _ in range(count)
            ]
            # the handler's failure is part of the arguments; a repeat with other arguments is
            # another request, so the model keys on both
            if model.call(calls[0].id, key * 2 + fails, fails):
                expected_runs.append(calls[0].id)
            admitted = ledger.receive([LiveCall(c) for c in calls], now=0.0)
            outcomes = await dispatcher.run(admitted, on_settled=ledger.settle)
            if count == 2:
                assert outcomes[1].kind == "duplicate" and outcomes[1].dedup == "twin"
        elif what == "send":
            message = ledger.drain(0.0)
            if message is not None:
                ledger.sent(message, 0.0)
            model.send()
        elif what == "ack":
            ledger.server_message()
            model.ack()
        else:
            ledger.disconnected()
            ledger.resumed(None, 0.0)
            model.reconnect()
    assert runs == expected_runs
