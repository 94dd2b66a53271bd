from collections.abc import Callable
from typing import Any, cast

import pytest

from livebridge.calls.call import Behavior, Call, Outcome, Partial
from livebridge.calls.ledger import CallLedger
from livebridge.calls.lives import CallState, LiveCall, Notice, Outgoing
from livebridge.errors import LedgerError
from livebridge.vendors.gemini import answers as gemini_live


def new_ledger(history: int = 4096, **options: Any) -> CallLedger:
    return CallLedger(history, encode=gemini_live.encode, **options)


def blocking(call_id: str, name: str = "f") -> LiveCall:
    return LiveCall(Call(call_id, name))


def non_blocking(call_id: str, name: str = "g", *, streaming: bool = False) -> LiveCall:
    return LiveCall(Call(call_id, name), "NON_BLOCKING", "WHEN_IDLE", streaming)


def ok(call_id: str, name: str = "f", value: Any = 1) -> Outcome:
    return Outcome(call_id, name, "ok", {"output": value})


def send(ledger: CallLedger, now: float = 1.0) -> Outgoing | None:
    """Drain and confirm, as the session's writer does after a successful send."""
    message = ledger.drain(now)
    if message is not None:
        ledger.sent(message, now)
    return message


def sent_ids(ledger: CallLedger, now: float = 1.0) -> list[str] | None:
    message = send(ledger, now)
    return None if message is None else [r["id"] for r in message.function_responses]


def fate_of(ledger: CallLedger, call_id: str) -> str:
    (fate,) = [f.fate for f in ledger.fates() if f.call_id == call_id]
    return fate


# -- blocking batches -------------------------------------------------------------------------


def test_blocking_batch_goes_out_in_one_message_when_the_last_settles() -> None:
    ledger = new_ledger()
    run = ledger.receive([blocking("a"), blocking("b"), blocking("c")], now=10.0)
    assert [c.id for c in run] == ["a", "b", "c"]
    ledger.settle(ok("b"))
    ledger.settle(Outcome("a", "f", "error", {"error": {"type": "ValueError"}}))
    assert send(ledger, 11.0) is None
    assert ledger.blocking_pending
    ledger.settle(Outcome("c", "f", "timeout", {"error": {"type": "timeout"}}))
    message = send(ledger, 12.5)
    assert message is not None
    assert [r["id"] for r in message.function_responses] == ["a", "b", "c"]
    assert [r["response"] for r in message.function_responses] == [
        {"error": {"type": "ValueError"}},
        {"output": 1},
        {"error": {"type": "timeout"}},
    ]
    assert [a.turnaround for a in message.answered] == [2.5, 2.5, 2.5]
    assert [a.outcome.kind for a in message.answered if a.outcome] == ["error", "ok", "timeout"]
    assert not ledger.blocking_pending
    assert ledger.idle
    assert [(f.call_id, f.fate, f.ended_at) for f in ledger.fates()] == [
        ("a", "answered", 12.5),
        ("b", "answered", 12.5),
        ("c", "answered", 12.5),
    ]
    assert ledger.take_fates() == []  # the message sent reports them: nothing waits
    assert ledger.waiting == 0
    assert send(ledger, 13.0) is None


def test_each_receive_is_its_own_batch() -> None:
    ledger = new_ledger()
    ledger.receive([blocking("a")], now=0.0)
    ledger.receive([blocking("b")], now=0.0)
    ledger.settle(ok("b"))
    assert sent_ids(ledger) == ["b"]
    ledger.settle(ok("a"))
    assert sent_ids(ledger) == ["a"]


def test_cancelled_member_does_not_hold_the_batch() -> None:
    ledger = new_ledger()
    ledger.receive([blocking("a"), blocking("b"), blocking("c")], now=0.0)
    ledger.settle(ok("a"))
    assert ledger.cancel(["a", "b"], now=1.0) == ["b"]  # a had settled: only b still runs
    ledger.settle(ok("c"))
    assert sent_ids(ledger) == ["c"]
    assert [fate_of(ledger, i) for i in "abc"] == ["cancelled", "cancelled", "answered"]


def test_cancelling_the_last_running_member_releases_the_batch() -> None:
    ledger = new_ledger()
    ledger.receive([blocking("a"), blocking("b")], now=0.0)
    ledger.settle(ok("a"))
    assert ledger.cancel(["b"], now=1.0) == ["b"]
    assert sent_ids(ledger) == ["a"]


def test_a_fully_cancelled_batch_sends_nothing() -> None:
    ledger = new_ledger()
    ledger.receive([blocking("a"), blocking("b")], now=0.0)
    assert ledger.cancel(["a", "b"], now=1.0) == ["a", "b"]
    ledger.settle(Outcome("a", "f", "cancelled", {"error": {"type": "cancelled"}}))
    ledger.settle(Outcome("b", "f", "cancelled", {"error": {"type": "cancelled"}}))
    assert send(ledger, 2.0) is None
    assert ledger.idle
    assert [n.kind for n in ledger.take_notices()] == ["dropped_result", "dropped_result"]


def test_cancel_after_release_but_before_drain_withholds_the_answer() -> None:
    ledger = new_ledger()
    ledger.receive([blocking("a"), blocking("b")], now=0.0)
    ledger.settle(ok("a"))
    ledger.settle(ok("b"))
    assert ledger.cancel(["a"], now=1.0) == []
    assert sent_ids(ledger) == ["b"]


def test_locally_cancelled_handler_is_answered_with_its_error() -> None:
    ledger = new_ledger()
    ledger.receive([blocking("a")], now=0.0)
    ledger.settle(Outcome("a", "f", "cancelled", {"error": {"type": "cancelled"}}))
    assert sent_ids(ledger) == ["a"]
    assert fate_of(ledger, "a") == "answered"


# -- non-blocking and streaming ----------------------------------------------------------------


def test_non_blocking_answers_as_each_settles_and_coalesces() -> None:
    ledger = new_ledger()
    run = ledger.receive([non_blocking("a"), non_blocking("b"), non_blocking("c")], now=0.0)
    assert len(run) == 3
    assert not ledger.blocking_pending
    ledger.settle(ok("b", "g"))
    assert sent_ids(ledger) == ["b"]
    ledger.settle(Outcome("c", "g", "ok", {"output": 3}, scheduling="INTERRUPT"))
    ledger.settle(ok("a", "g"))
    message = send(ledger, 2.0)
    assert message is not None
    assert message.function_responses == [
        {"id": "c", "name": "g", "response": {"output": 3}, "scheduling": "INTERRUPT"},
        {"id": "a", "name": "g", "response": {"output": 1}, "scheduling": "WHEN_IDLE"},
    ]


def test_streaming_items_then_the_end() -> None:
    ledger = new_ledger()
    ledger.receive([non_blocking("s", streaming=True)], now=0.0)
    ledger.partial(Partial("s", "g", {"output": 1}))
    message = send(ledger, 1.0)
    assert message is not None
    assert message.function_responses[0]["willContinue"] is True
    assert message.answered[0].outcome is None
    assert ledger.pending_ids == {"s"}
    ledger.partial(Partial("s", "g", {"output": 2}, scheduling="SILENT"))
    ledger.settle(Outcome("s", "g", "ok", {}))
    message = send(ledger, 2.0)
    assert message is not None
    assert [(r["willContinue"], r["scheduling"]) for r in message.function_responses] == [
        (True, "SILENT"),
        (False, "WHEN_IDLE"),
    ]
    assert message.function_responses[1]["response"] == {}
    assert fate_of(ledger, "s") == "answered"


def test_mixed_behaviors_in_one_tool_call() -> None:
    ledger = new_ledger()
    ledger.receive([blocking("a"), non_blocking("n"), blocking("b")], now=0.0)
    ledger.settle(ok("n", "g"))
    ledger.settle(ok("a"))
    assert sent_ids(ledger) == ["n"]
    ledger.settle(ok("b"))
    assert sent_ids(ledger) == ["a", "b"]


def test_ready_answers_of_both_kinds_share_one_message() -> None:
    ledger = new_ledger()
    ledger.receive([blocking("a"), non_blocking("n")], now=0.0)
    ledger.settle(ok("a"))
    ledger.settle(ok("n", "g"))
    assert sent_ids(ledger) == ["a", "n"]


# -- identity: duplicates, twins, re-issues ------------------------------------------------------


def test_duplicate_delivery_while_pending_runs_once() -> None:
    ledger = new_ledger()
    assert [c.id for c in ledger.receive([blocking("a")], now=0.0, via="model_turn")] == ["a"]
    assert ledger.receive([blocking("a"), blocking("b")], now=0.1) == [Call("b", "f")]
    assert ledger.take_notices() == [
        Notice("duplicate_delivery", "a", "second delivery via tool_call dropped")
    ]
    ledger.settle(ok("a"))
    assert sent_ids(ledger) == ["a"]


def test_same_id_twice_in_one_message_runs_once() -> None:
    ledger = new_ledger()
    assert [c.id for c in ledger.receive([blocking("a"), blocking("a")], now=0.0)] == ["a"]


def test_twin_from_the_other_source_after_the_answer_is_dropped() -> None:
    ledger = new_ledger()
    ledger.receive([blocking("a")], now=0.0, via="model_turn")
    ledger.settle(ok("a"))
    assert sent_ids(ledger) == ["a"]
    assert ledger.receive([blocking("a")], now=1.0, via="tool_call") == []
    assert len(ledger.fates()) == 1


def test_reissue_after_the_answer_is_answered_again() -> None:
    ledger = new_ledger()
    ledger.receive([blocking("a")], now=0.0)
    ledger.settle(ok("a"))
    assert sent_ids(ledger) == ["a"]
    assert ledger.receive([blocking("a")], now=5.0) == [Call("a", "f")]
    ledger.settle(ok("a"))  # the dispatcher's cached answer
    message = send(ledger, 5.5)
    assert message is not None
    assert message.answered[0].turnaround == 0.5
    assert [f.fate for f in ledger.fates()] == ["answered", "answered"]


def test_twin_rule_resets_on_a_new_connection() -> None:
    ledger = new_ledger()
    ledger.receive([blocking("a")], now=0.0, via="tool_call")
    ledger.settle(ok("a"))
    send(ledger, 1.0)
    ledger.handle_issued("h")
    ledger.disconnected()
    ledger.resumed("h", now=2.0)
    assert ledger.receive([blocking("a")], now=3.0, via="model_turn") == [Call("a", "f")]


# -- cancellation -------------------------------------------------------------------------------


def test_cancel_reports_unknown_and_late_ids() -> None:
    ledger = new_ledger()
    ledger.receive([blocking("a")], now=0.0)
    ledger.settle(ok("a"))
    send(ledger, 1.0)
    assert ledger.cancel(["a", "zz"], now=2.0) == []
    assert [(n.kind, n.call_id) for n in ledger.take_notices()] == [
        ("late_cancel", "a"),
        ("unknown_cancel", "zz"),
    ]
    assert fate_of(ledger, "a") == "answered"


def test_streaming_call_cancelled_mid_stream_sends_nothing_more() -> None:
    ledger = new_ledger()
    ledger.receive([non_blocking("s", streaming=True)], now=0.0)
    ledger.partial(Partial("s", "g", {"output": 1}))
    assert ledger.cancel(["s"], now=1.0) == ["s"]
    ledger.partial(Partial("s", "g", {"output": 2}))
    ledger.settle(Outcome("s", "g", "cancelled", {"error": {"type": "cancelled"}}))
    assert send(ledger, 2.0) is None
    assert [f.fate for f in ledger.fates()] == ["cancelled"]


# -- disconnects and resumption -----------------------------------------------------------------


def test_answers_wait_for_the_socket() -> None:
    ledger = new_ledger()
    ledger.receive([blocking("a")], now=0.0)
    ledger.handle_issued("h1")
    ledger.disconnected()
    ledger.settle(ok("a"))
    assert not ledger.connected
    assert send(ledger, 1.0) is None
    assert ledger.resumed("h1", now=2.0) == []
    assert sent_ids(ledger, 2.0) == ["a"]


@pytest.mark.parametrize(
    ("handle", "orphaned"),
    [
        ("h1", ["b", "c"]),  # h1 was issued after a only
        ("h2", ["c"]),
        ("h3", []),
        ("unknown", ["a", "b", "c"]),
        (None, ["a", "b", "c"]),
    ],
)
def test_resume_orphans_calls_the_handle_does_not_know(
    handle: str | None, orphaned: list[str]
) -> None:
    ledger = new_ledger()
    ledger.receive([blocking("a")], now=0.0)
    ledger.handle_issued("h1")
    ledger.receive([non_blocking("b")], now=0.0)
    ledger.handle_issued("h2")
    ledger.receive([blocking("c")], now=0.0)
    ledger.handle_issued("h3")
    ledger.disconnected()
    assert ledger.resumed(handle, now=1.0) == orphaned
    assert {f.call_id for f in ledger.take_fates() if f.fate == "orphaned"} == set(orphaned)
    for call_id, name in (("a", "f"), ("b", "g"), ("c", "f")):
        ledger.settle(ok(call_id, name))
    assert sorted(sent_ids(ledger) or []) == sorted({"a", "b", "c"} - set(orphaned))


def test_fresh_session_forgets_old_handles() -> None:
    ledger = new_ledger()
    ledger.handle_issued("h1")
    ledger.resumed(None, now=0.0)
    ledger.receive([blocking("a")], now=0.0)
    ledger.resumed("h1", now=1.0)
    assert fate_of(ledger, "a") == "orphaned"


def test_only_the_newest_handles_are_kept() -> None:
    ledger = new_ledger()
    ledger.receive([blocking("a")], now=0.0)
    for index in range(20):
        ledger.handle_issued(f"h{index}")
    assert ledger.resumed("h0", now=1.0) == ["a"]


def test_switch_over_without_a_disconnect() -> None:
    ledger = new_ledger()
    ledger.receive([blocking("a")], now=0.0)
    ledger.handle_issued("h")
    ledger.settle(ok("a"))
    assert ledger.resumed("h", now=1.0) == []
    assert sent_ids(ledger) == ["a"]


# -- shutdown and close ---------------------------------------------------------------------------


def test_shutdown_then_close() -> None:
    ledger = new_ledger()
    ledger.receive([blocking("a"), blocking("b"), non_blocking("n")], now=0.0)
    ledger.settle(ok("a"))
    assert ledger.shutdown() == ["b", "n"]
    # Still received (the dispatcher answers it without running it); here it never settles.
    assert [c.id for c in ledger.receive([blocking("late")], now=1.0)] == ["late"]
    ledger.settle(ok("n", "g"))
    assert sent_ids(ledger) == ["n"]
    assert ledger.close(now=2.0) == ["a", "b", "late"]
    assert ledger.close(now=3.0) == []
    ledger.settle(ok("b"))
    assert send(ledger, 4.0) is None
    assert ledger.idle
    assert [(f.call_id, f.fate, f.reason) for f in ledger.fates()] == [
        ("n", "answered", "sent"),
        ("a", "orphaned", "session closed"),
        ("b", "orphaned", "session closed"),
        ("late", "orphaned", "session closed"),
    ]


def test_shutdown_lets_the_batch_finish() -> None:
    ledger = new_ledger()
    ledger.receive([blocking("a"), blocking("b")], now=0.0)
    assert ledger.shutdown() == ["a", "b"]
    ledger.settle(ok("a"))
    ledger.settle(ok("b"))
    assert sent_ids(ledger) == ["a", "b"]
    assert ledger.close(now=1.0) == []


# -- illegal events: they raise and change nothing ------------------------------------------------


def _reach(state: CallState, behavior: Behavior, streaming: bool) -> CallLedger:
    """A ledger whose call ``x`` is in ``state`` (and ``y`` runs in the same batch)."""
    ledger = new_ledger()
    call = LiveCall(Call("x", "f"), behavior, None, streaming)
    ledger.receive([call, LiveCall(Call("y", "f"), behavior)], now=0.0)
    if state in ("settled", "ready", "answered"):
        ledger.settle(ok("x"))
    if state == "answered":
        ledger.settle(ok("y"))
        send(ledger, 1.0)
    if state == "cancelled":
        ledger.cancel(["x"], now=1.0)
    if state == "orphaned":
        ledger.resumed(None, now=1.0)
    assert ledger.state("x") == state
    return ledger


def _settle(ledger: CallLedger) -> None:
    ledger.settle(ok("x"))


def _partial(ledger: CallLedger) -> None:
    ledger.partial(Partial("x", "f", {"output": 0}))


@pytest.mark.parametrize(
    ("state", "behavior", "streaming", "event", "legal"),
    [
        ("running", "BLOCKING", False, _settle, True),
        ("running", "BLOCKING", False, _partial, False),
        ("running", "NON_BLOCKING", False, _partial, False),
        ("running", "NON_BLOCKING", True, _partial, True),
        ("settled", "BLOCKING", False, _settle, False),
        ("settled", "BLOCKING", False, _partial, False),
        ("ready", "NON_BLOCKING", True, _settle, False),
        ("ready", "NON_BLOCKING", True, _partial, False),
        ("answered", "BLOCKING", False, _settle, False),
        ("answered", "NON_BLOCKING", True, _partial, False),
        ("cancelled", "BLOCKING", False, _settle, True),
        ("cancelled", "NON_BLOCKING", True, _partial, True),
        ("orphaned", "BLOCKING", False, _settle, True),
        ("orphaned", "NON_BLOCKING", True, _partial, True),
    ],
)
def test_transition_table(
    state: CallState,
    behavior: Behavior,
    streaming: bool,
    event: Callable[[CallLedger], None],
    legal: bool,
) -> None:
    ledger = _reach(state, behavior, streaming)
    before = (ledger.pending_ids, ledger.fates(), ledger.blocking_pending)
    if legal:
        event(ledger)
        return
    with pytest.raises(LedgerError, match="call x"):
        event(ledger)
    assert ledger.state("x") == state
    assert (ledger.pending_ids, ledger.fates(), ledger.blocking_pending) == before


def test_late_settle_after_cancel_cannot_settle_twice() -> None:
    ledger = _reach("cancelled", "BLOCKING", False)
    ledger.settle(ok("x"))
    with pytest.raises(LedgerError, match="settled twice"):
        ledger.settle(ok("x"))


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (lambda ledger: ledger.settle(ok("nope")), "never received"),
        (lambda ledger: ledger.partial(Partial("nope", "f", {})), "never received"),
        (
            lambda ledger: ledger.settle(Outcome("x", "f", cast(Any, "orphaned"), {})),
            "only the ledger",
        ),
        (lambda ledger: ledger.receive([blocking("z"), blocking("")], now=0.0), "without an id"),
        (
            lambda ledger: ledger.receive(
                [blocking("z"), LiveCall(Call("w", "f"), "BLOCKING", None, True)], now=0.0
            ),
            "only NON_BLOCKING",
        ),
        (lambda ledger: ledger.handle_issued(""), "empty"),
    ],
)
def test_illegal_events(action: Callable[[CallLedger], object], message: str) -> None:
    ledger = new_ledger()
    ledger.receive([blocking("x")], now=0.0)
    with pytest.raises(LedgerError, match=message):
        action(ledger)
    assert ledger.pending_ids == {"x"}
    assert ledger.state("z") is None
    ledger.settle(ok("x"))
    assert sent_ids(ledger) == ["x"]


# -- one message in flight --------------------------------------------------------------------


def test_one_message_in_flight_until_sent() -> None:
    ledger = new_ledger()
    ledger.receive([non_blocking("a"), non_blocking("b")], now=0.0)
    ledger.settle(ok("a", "g"))
    first = ledger.drain(1.0)
    assert first is not None
    ledger.settle(ok("b", "g"))
    assert ledger.drain(1.5) is None
    assert ledger.pending_ids == {"a", "b"}
    ledger.sent(first, 2.0)
    assert [(f.call_id, f.ended_at) for f in ledger.fates()] == [("a", 2.0)]
    assert sent_ids(ledger, 3.0) == ["b"]


def test_unsent_message_goes_back_to_the_front_of_the_queue() -> None:
    ledger = new_ledger()
    ledger.receive([non_blocking("a"), non_blocking("b")], now=0.0)
    ledger.handle_issued("h")
    ledger.settle(ok("a", "g"))
    lost = ledger.drain(1.0)
    assert lost is not None
    ledger.disconnected()  # the send failed: the socket closed under it
    ledger.settle(ok("b", "g"))
    assert ledger.resumed("h", now=2.0) == []
    assert sent_ids(ledger, 3.0) == ["a", "b"]
    with pytest.raises(LedgerError, match="drain"):
        ledger.sent(lost, 4.0)


def test_cancel_while_in_flight_keeps_the_cancelled_fate() -> None:
    ledger = new_ledger()
    ledger.receive([non_blocking("a")], now=0.0)
    ledger.settle(ok("a", "g"))
    message = ledger.drain(1.0)
    assert message is not None
    ledger.cancel(["a"], now=1.5)
    ledger.sent(message, 2.0)
    assert [f.fate for f in ledger.fates()] == ["cancelled"]


def test_sent_without_drain_is_illegal() -> None:
    ledger = new_ledger()
    ledger.receive([blocking("a")], now=0.0)
    ledger.settle(ok("a"))
    message = ledger.drain(1.0)
    assert message is not None
    ledger.sent(message, 1.0)
    with pytest.raises(LedgerError, match="sent"):
        ledger.sent(message, 2.0)
    assert [f.fate for f in ledger.fates()] == ["answered"]


def test_memory_stays_bounded_in_a_long_session() -> None:
    ledger = new_ledger(history=8)
    for i in range(100):
        ledger.receive([blocking(f"c{i}")], now=float(i))
        ledger.settle(ok(f"c{i}"))
        assert sent_ids(ledger) == [f"c{i}"]
    pending = ledger.receive([blocking("still-running")], now=100.0)
    assert [c.id for c in pending] == ["still-running"]
    assert len(ledger.fates()) == 8
    assert ledger.state("c0") is None  # forgotten long ago
    assert ledger.state("c99") == "answered"  # recent calls are still recognised
    assert ledger.pending_ids == {"still-running"}
    assert ledger.fates()[-1].call_id == "c99"
    assert ledger.take_fates() == []


def test_history_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        new_ledger(history=0)


def test_answers_sent_wait_for_no_take_and_a_fate_not_taken_outlives_them() -> None:
    ledger = new_ledger(history=64)
    ledger.receive([blocking("gone")], now=0.0)
    assert ledger.cancel(["gone"], 0.5) == ["gone"]
    assert ledger.waiting == 1
    for i in range(400):  # far past the fates kept in full and the history
        ledger.receive([blocking(f"c{i}")], now=float(i))
        ledger.settle(ok(f"c{i}"))
        assert sent_ids(ledger, float(i)) == [f"c{i}"]
        assert ledger.waiting == 1  # each answer is reported by its message
    assert [(f.call_id, f.fate) for f in ledger.take_fates()] == [("gone", "cancelled")]
    assert ledger.waiting == 0 and ledger.take_fates() == []
    assert ledger.fates()[-1].call_id == "c399" and len(ledger.fates()) == 64


def test_fates_never_taken_are_kept_up_to_the_history() -> None:
    ledger = new_ledger(history=8)
    for i in range(20):
        ledger.receive([blocking(f"c{i}")], now=float(i))
    ledger.close(20.0)
    assert ledger.waiting == 8
    assert [f.call_id for f in ledger.take_fates()] == [f"c{i}" for i in range(12, 20)]
