"""Calls without ids (Vertex AI) are answered by name: any interleaving keeps them in call order.

The service matches an answer without an id to the oldest open call of its function, so the
ledger must never send the answer of a later call to a function before an earlier one's, and
must still give every call exactly one fate and never hold an answer forever.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from livebridge.calls.call import Behavior, Call, Outcome
from livebridge.calls.endings import OutcomeKind
from livebridge.calls.ledger import CallLedger
from livebridge.calls.lives import LiveCall, Outgoing
from livebridge.vendors.gemini import answers as gemini_live
from tests.support.hypothesis_profiles import examples

NAMES = ("f", "g")


@dataclass
class Life:
    key: str
    name: str
    behavior: Behavior
    seq: int
    settled: bool = False
    fates: list[str] = field(default_factory=list)


class NamelessMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ledger = CallLedger(encode=gemini_live.encode)
        self.clock = 0.0
        self.lives: dict[str, Life] = {}
        self.running: set[str] = set()
        self.connected = True
        self.in_flight: Outgoing | None = None
        self.answered: dict[str, list[int]] = {name: [] for name in NAMES}

    def tick(self) -> float:
        self.clock += 1.0
        return self.clock

    @rule(
        calls=st.lists(
            st.tuples(st.sampled_from(NAMES), st.sampled_from(["BLOCKING", "NON_BLOCKING"])),
            min_size=1,
            max_size=4,
        )
    )
    def receive(self, calls: list[tuple[str, Behavior]]) -> None:
        now = self.tick()
        live_calls = []
        for name, behavior in calls:
            key = f"nameless-call-{len(self.lives) + 1}"
            self.lives[key] = Life(key, name, behavior, len(self.lives))
            live_calls.append(LiveCall(Call(key, name), behavior, anonymous=True))
        admitted = self.ledger.receive(live_calls, now)
        assert [c.id for c in admitted] == [lc.call.id for lc in live_calls]
        self.running |= {c.id for c in admitted}

    @precondition(lambda self: bool(self.running))
    @rule(data=st.data(), kind=st.sampled_from(["ok", "error", "timeout"]))
    def settle(self, data: st.DataObject, kind: OutcomeKind) -> None:
        key = data.draw(st.sampled_from(sorted(self.running)))
        life = self.lives[key]
        self.ledger.settle(Outcome(key, life.name, kind, {"output": life.seq}))
        life.settled = True
        self.running.discard(key)

    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        live = sorted(k for k, life in self.lives.items() if not life.fates)
        if live:
            key = data.draw(st.sampled_from(live))
            for running in self.ledger.cancel([key], self.tick(), "new input"):
                self.running.discard(running)

    @rule()
    def drain(self) -> None:
        if self.in_flight is not None or not self.connected:
            return
        message = self.ledger.drain(self.tick())
        if message is None:
            return
        for response, answered in zip(message.function_responses, message.answered, strict=True):
            assert "id" not in response, "an id of the session's own went on the wire"
            assert response["name"] == self.lives[answered.call_id].name
        self.in_flight = message

    @precondition(lambda self: self.in_flight is not None)
    @rule()
    def sent(self) -> None:
        assert self.in_flight is not None
        for answered in self.in_flight.answered:
            life = self.lives[answered.call_id]
            if not life.fates:
                self.answered[life.name].append(life.seq)
        self.ledger.sent(self.in_flight, self.tick())
        for answered in self.in_flight.answered:  # an answer's fate is the message's to report
            life = self.lives[answered.call_id]
            if not life.fates and self.ledger.state(answered.call_id) == "answered":
                life.fates.append("answered")
        self.in_flight = None

    @precondition(lambda self: self.connected)
    @rule()
    def drop_and_resume_fresh(self) -> None:
        self.ledger.disconnected()
        self.in_flight = None
        for key in self.ledger.resumed(None, self.tick()):
            self.running.discard(key)

    @rule()
    def settle_everything(self) -> None:
        for key in sorted(self.running):
            life = self.lives[key]
            self.ledger.settle(Outcome(key, life.name, "ok", {"output": life.seq}))
            life.settled = True
        self.running.clear()
        while True:
            if self.in_flight is not None:
                self.sent()
            self.drain()
            if self.in_flight is None:
                break
        assert self.ledger.idle, "an answer was held although every call settled"

    @invariant()
    def one_fate_each(self) -> None:
        for fate in self.ledger.take_fates():
            life = self.lives[fate.call_id]
            life.fates.append(fate.fate)
            assert len(life.fates) == 1, f"{life.key}: {life.fates}"
        self.ledger.take_notices()

    @invariant()
    def answers_keep_call_order(self) -> None:
        for name, seqs in self.answered.items():
            assert seqs == sorted(seqs), f"answers to {name} out of call order: {seqs}"

    def teardown(self) -> None:
        self.ledger.close(self.tick())
        self.one_fate_each()
        assert all(len(life.fates) == 1 for life in self.lives.values())


NamelessMachine.TestCase.settings = settings(
    max_examples=examples(300),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestNameless = NamelessMachine.TestCase
