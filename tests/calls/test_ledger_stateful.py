"""Any interleaving of Live events keeps the ledger's promises.

Each step runs at a distinct integer time, so a delivery (a *life*) is named by its id and the
time it was received, and so is every fate and every response the ledger hands out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from livebridge.calls.call import Behavior, Call, Outcome, Partial
from livebridge.calls.endings import OutcomeKind
from livebridge.calls.ledger import CallLedger
from livebridge.calls.lives import LiveCall, Outgoing, Via
from livebridge.errors import LedgerError
from livebridge.vendors.gemini import answers as gemini_live
from tests.support.hypothesis_profiles import examples

TOOLS: dict[str, tuple[Behavior, bool]] = {
    "b0": ("BLOCKING", False),
    "b1": ("BLOCKING", False),
    "b2": ("BLOCKING", False),
    "n0": ("NON_BLOCKING", False),
    "n1": ("NON_BLOCKING", False),
    "s0": ("NON_BLOCKING", True),
    "s1": ("NON_BLOCKING", True),
}
IDS = sorted(TOOLS)
Key = tuple[str, float]  # (call id, received at)


@dataclass
class Life:
    key: Key
    behavior: Behavior
    streaming: bool
    epoch: int
    via: set[str]
    batch: list[Key] = field(default_factory=list)
    outcome: Outcome | None = None
    fates: list[str] = field(default_factory=list)
    finals_sent: int = 0

    @property
    def live(self) -> bool:
        return not self.fates


class LedgerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ledger = CallLedger(encode=gemini_live.encode)
        self.clock = 0.0
        self.lives: dict[Key, Life] = {}
        self.newest: dict[str, Life] = {}
        self.running: set[str] = set()  # handlers the dispatcher still runs
        self.connected = True
        self.accepting = True
        self.epoch = 0  # connections opened: a twin copy only counts within one
        self.in_flight: Outgoing | None = None
        self.in_flight_finals: list[Key] = []
        self.handles: dict[str, set[Key]] = {}
        self.handle_order: list[str] = []

    def tick(self) -> float:
        self.clock += 1.0
        return self.clock

    def live_lives(self) -> list[Life]:
        return [life for life in self.lives.values() if life.live]

    # -- events ------------------------------------------------------------------------------

    @rule(
        ids=st.lists(st.sampled_from(IDS), min_size=1, max_size=4),
        via=st.sampled_from(["tool_call", "model_turn"]),
        then_handle=st.booleans(),
    )
    def receive(self, ids: list[str], via: Via, then_handle: bool) -> None:
        now = self.tick()
        calls = [LiveCall(Call(i, "t_" + i), *TOOLS[i][:1], None, TOOLS[i][1]) for i in ids]
        admitted: list[Life] = []
        for call_id in dict.fromkeys(ids):
            previous = self.newest.get(call_id)
            if previous is not None:
                twin = previous.epoch == self.epoch and via not in previous.via
                if previous.live or twin:
                    previous.via.add(via)
                    continue
            behavior, streaming = TOOLS[call_id]
            life = Life((call_id, now), behavior, streaming, self.epoch, {via})
            self.lives[life.key] = life
            self.newest[call_id] = life
            admitted.append(life)
        run = [call.id for call in self.ledger.receive(calls, now, via=via)]
        assert run == [life.key[0] for life in admitted]  # after shutdown too: answered, not run
        batch = [life.key for life in admitted if life.behavior == "BLOCKING"]
        for life in admitted:
            if life.behavior == "BLOCKING":
                life.batch = batch
        self.running |= set(run)
        if then_handle:
            self.handle_issued()

    @precondition(lambda self: bool(self.running))
    @rule(data=st.data(), kind=st.sampled_from(["ok", "error", "timeout", "cancelled"]))
    def settle(self, data: st.DataObject, kind: OutcomeKind) -> None:
        pick = st.lists(st.sampled_from(sorted(self.running)), min_size=1, max_size=3, unique=True)
        for call_id in data.draw(pick):
            life = self.newest[call_id]
            outcome = Outcome(call_id, "t_" + call_id, kind, {"output": self.tick()})
            self.ledger.settle(outcome)
            life.outcome = outcome
            self.running.discard(call_id)

    @precondition(lambda self: any(TOOLS[i][1] for i in self.running))
    @rule(data=st.data())
    def partial(self, data: st.DataObject) -> None:
        streaming = sorted(i for i in self.running if TOOLS[i][1])
        call_id = data.draw(st.sampled_from(streaming))
        self.ledger.partial(Partial(call_id, "t_" + call_id, {"item": self.tick()}))

    @rule(ids=st.lists(st.sampled_from([*IDS, "unknown"]), max_size=3))
    def cancel(self, ids: list[str]) -> None:
        now = self.tick()
        expected = []
        for call_id in dict.fromkeys(ids):
            life = self.newest.get(call_id)
            if life is not None and life.live and life.outcome is None:
                expected.append(call_id)
        assert self.ledger.cancel(ids, now) == expected

    @rule()
    def handle_issued(self) -> None:
        handle = f"h{len(self.handle_order)}"
        self.ledger.handle_issued(handle)
        self.handles[handle] = set(self.lives)
        self.handle_order.append(handle)

    @precondition(lambda self: self.connected)
    @rule()
    def disconnect(self) -> None:
        self.ledger.disconnected()
        self.connected = False
        self.in_flight = None  # it did not leave: back in the queue

    @rule(choice=st.sampled_from(["newest", "oldest", "fresh", "bogus"]))
    def resume(self, choice: str) -> None:
        now = self.tick()
        handle: str | None
        if choice == "fresh":
            handle = None
        elif choice == "bogus" or not self.handle_order:
            handle = "bogus"
        else:
            handle = self.handle_order[-1 if choice == "newest" else 0]
        known = self.handles.get(handle, set()) if handle else set()
        expected = [life.key[0] for life in self.live_lives() if life.key not in known]
        assert self.ledger.resumed(handle, now) == expected
        if handle is None:
            self.handles.clear()
            self.handle_order.clear()
        self.connected = True
        self.in_flight = None
        self.epoch += 1

    @rule()
    def drain(self) -> None:
        now = self.tick()
        message = self.ledger.drain(now)
        if not self.connected or self.in_flight is not None:
            assert message is None, "nothing is sent without a socket, one message at a time"
            return
        if message is not None:
            self.check_message(message, now)
            self.in_flight = message

    @precondition(lambda self: self.in_flight is not None)
    @rule()
    def sent(self) -> None:
        if self.in_flight is None:
            return
        self.ledger.sent(self.in_flight, self.tick())
        for key in self.in_flight_finals:
            life = self.lives[key]
            if life.live:  # its fate: reported by the message, never by take_fates()
                life.finals_sent += 1
                assert life.finals_sent == 1, f"{key} answered twice"
                life.fates.append("answered")
        self.in_flight = None

    @precondition(lambda self: self.in_flight is not None)
    @rule(data=st.data())
    def cancel_while_sending(self, data: st.DataObject) -> None:
        assert self.in_flight is not None
        call_id = data.draw(st.sampled_from([r["id"] for r in self.in_flight.function_responses]))
        self.cancel([call_id])
        self.fates_are_recorded_once()
        self.sent()

    @precondition(lambda self: self.in_flight is not None)
    @rule(choice=st.sampled_from(["newest", "fresh"]))
    def drop_while_sending(self, choice: str) -> None:
        self.disconnect()
        self.resume(choice)

    @precondition(lambda self: any(len(self.newest[i].batch) > 1 for i in self.running))
    @rule(data=st.data())
    def settle_part_of_a_batch_and_send(self, data: st.DataObject) -> None:
        split = [i for i in sorted(self.running) if len(self.newest[i].batch) > 1]
        call_id = data.draw(st.sampled_from(split))
        outcome = Outcome(call_id, "t_" + call_id, "error", {"error": {"at": self.tick()}})
        self.ledger.settle(outcome)
        self.newest[call_id].outcome = outcome
        self.running.discard(call_id)
        self.drain()
        self.sent()

    @rule()
    def settle_all_and_send(self) -> None:
        for call_id in sorted(self.running):
            life = self.newest[call_id]
            outcome = Outcome(call_id, "t_" + call_id, "ok", {"output": self.tick()})
            self.ledger.settle(outcome)
            life.outcome = outcome
        self.running.clear()
        self.sent()
        self.drain()
        self.sent()
        if self.connected:
            assert self.ledger.idle, "every settled call is answered once a socket is open"

    @precondition(lambda self: self.accepting)
    @rule()
    def shutdown(self) -> None:
        expected = [life.key[0] for life in self.live_lives() if life.outcome is None]
        assert self.ledger.shutdown() == expected
        self.accepting = False

    @rule(call_id=st.sampled_from([*IDS, "unknown"]))
    def illegal_settle(self, call_id: str) -> None:
        life = self.newest.get(call_id)
        if call_id in self.running or (life is not None and life.outcome is None):
            return
        before = self.ledger.pending_ids
        with pytest.raises(LedgerError):
            self.ledger.settle(Outcome(call_id, "t", "ok", {}))
        assert self.ledger.pending_ids == before

    # -- checks ------------------------------------------------------------------------------

    def check_message(self, message: Outgoing, now: float) -> None:
        assert message.function_responses
        assert len(message.function_responses) == len(message.answered)
        if message.encoded is not None:  # what the transport sends as is
            assert message.encoded == msgspec.json.encode(message.function_responses)
        finals: list[Key] = []
        for response, answered in zip(message.function_responses, message.answered, strict=True):
            key = (response["id"], now - answered.turnaround)
            life = self.lives[key]
            assert life.live, f"a response for {key} after its fate {life.fates}"
            if life.behavior == "BLOCKING":
                assert "scheduling" not in response
                assert "willContinue" not in response
            if answered.outcome is None:
                assert life.streaming
                assert response["willContinue"] is True
                assert key not in finals, "an item after the end"
                continue
            assert answered.outcome == life.outcome
            assert response["response"] == life.outcome.response
            assert response.get("willContinue", False) is False
            assert key not in finals
            assert life.finals_sent == 0
            finals.append(key)
        for key in finals:
            for sibling in self.lives[key].batch:
                fates = self.lives[sibling].fates
                assert sibling in finals or fates == ["cancelled"], (
                    f"batch of {key} split: {sibling} is {fates}"
                )
        self.in_flight_finals = finals

    @invariant()
    def fates_are_recorded_once(self) -> None:
        waiting = self.ledger.waiting  # a reporter looks only when something waits
        fates = self.ledger.take_fates()
        notices = self.ledger.take_notices()
        assert waiting == len(fates) + len(notices)
        assert self.ledger.waiting == 0
        for fate in fates:
            life = self.lives[(fate.call_id, fate.received_at)]
            life.fates.append(fate.fate)
            assert len(life.fates) == 1, f"{life.key} has fates {life.fates}"
            assert fate.fate != "answered" and life.finals_sent == 0

    @invariant()
    def nothing_waits_unless_answers_are_ready(self) -> None:
        if not self.ledger.answers_ready:  # a session that trusts it leaves no answer behind
            assert self.ledger.drain(0.0) is None

    @invariant()
    def queries_agree(self) -> None:
        live = self.live_lives()
        assert self.ledger.pending_ids == {life.key[0] for life in live}
        assert self.ledger.blocking_pending == any(life.behavior == "BLOCKING" for life in live)
        assert self.ledger.idle == (not live)

    def teardown(self) -> None:
        self.ledger.close(self.tick())
        self.fates_are_recorded_once()
        for life in self.lives.values():
            assert len(life.fates) == 1, f"{life.key} ended with fates {life.fates}"
            assert life.finals_sent == (1 if life.fates == ["answered"] else 0)
        assert self.ledger.drain(self.tick()) is None


LedgerMachine.TestCase.settings = settings(
    max_examples=examples(600),
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLedger = LedgerMachine.TestCase
