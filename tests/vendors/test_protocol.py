"""``GeminiLiveProtocol`` without sockets: messages and the time in, events and actions out."""

from __future__ import annotations

import base64
import logging
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from livebridge.calls.call import Call, Outcome
from livebridge.calls.lives import Outgoing
from livebridge.calls.observers import (
    CallOrphaned,
    MessageSeen,
    SessionClosed,
    SessionOpened,
)
from livebridge.errors import ConnectionStateError
from livebridge.protocol.actions import (
    CancelCalls,
    ConnectionEvent,
    ConnectionState,
    ConnectionTable,
    Finish,
    Notify,
    ProtocolOptions,
    Reconnect,
    RunCalls,
    SwitchConnection,
)
from livebridge.protocol.events import (
    AudioOut,
    Closed,
    GoAway,
    InputTranscript,
    Interrupted,
    OutputTranscript,
    Resumed,
    TextOut,
    ToolCallSettled,
    ToolCallStarted,
    TurnComplete,
    record_of,
)
from livebridge.protocol.transport import Audio, Text
from livebridge.vendors.gemini import wire
from livebridge.vendors.gemini.protocol import GeminiLiveProtocol
from tests.support.deep_nesting import TOO_DEEP_FOR_ANY_PYTHON
from tests.support.hypothesis_profiles import examples
from tests.vendors.protocol_helpers import of, registry


def message(**fields: Any) -> wire.ServerMessage:
    return wire.decode_server(msgspec.json.encode(fields))


def opened(handle: str | None = "h0") -> GeminiLiveProtocol:
    protocol = GeminiLiveProtocol(registry(reminders=True), delays=iter([0.5] * 100))
    protocol.opened("s1", now=0.0)
    if handle:
        protocol.receive(
            message(sessionResumptionUpdate={"newHandle": handle, "resumable": True}), 0
        )
    return protocol


def tool_call(*calls: tuple[Any, Any, Any]) -> wire.ServerMessage:
    return message(
        toolCall={"functionCalls": [{"id": i, "name": n, "args": a} for i, n, a in calls]}
    )


def ok(call_id: str, name: str = "lookup") -> Outcome:
    return Outcome(call_id, name, "ok", {"output": "done"}, 0.1)


def test_audio_transcript_and_turn_complete_in_one_message() -> None:
    protocol = opened()
    pcm = b"\x01\x02" * 8
    out = protocol.receive(
        message(
            serverContent={
                "modelTurn": {
                    "parts": [
                        {"inlineData": {"mimeType": "audio/pcm;rate=16000", "data": b64(pcm)}}
                    ]
                },
                "outputTranscription": {"text": "hello", "finished": True},
                "turnComplete": True,
                "turnCompleteReason": "STOP",
            },
            usageMetadata={"totalTokenCount": 7},
        ),
        now=1.0,
    )
    events = [o for o in out if not isinstance(o, Notify)]
    assert events == [
        AudioOut(pcm, 16_000),
        OutputTranscript("hello", True),
        TurnComplete({"totalTokenCount": 7}, "STOP"),
    ]
    assert protocol.turn == 1
    notices = [n.event for n in of(out, Notify)]
    seen = {(e.direction, e.kind): e.count for e in notices if isinstance(e, MessageSeen)}
    assert seen[("received", "serverContent")] == 1  # counts flush at every turn
    assert seen[("received", "usageMetadata")] == 1


def test_every_field_of_one_message_is_handled_in_order() -> None:
    protocol = opened(handle=None)
    out = protocol.receive(
        message(
            setupComplete={},
            serverContent={
                "interrupted": True,
                "modelTurn": {
                    "parts": [
                        {"text": "thinking", "thought": True},
                        {"text": "visible"},
                        {"functionCall": {"id": "m1", "name": "lookup", "args": {"city": "A"}}},
                    ]
                },
                "inputTranscription": {"text": "hi"},
                "turnComplete": True,
            },
            toolCall={"functionCalls": [{"id": "t1", "name": "remind", "args": {"text": "x"}}]},
            toolCallCancellation={"ids": ["m1"]},
            sessionResumptionUpdate={"newHandle": "h9", "resumable": True},
            goAway={"timeLeft": "10s"},
            voiceActivity={"type": "ACTIVITY_START"},
        ),
        now=100.0,
    )
    actions = [o for o in out if not isinstance(o, Notify)]
    assert actions == [
        Interrupted(),
        TextOut("visible"),
        ToolCallStarted("m1", "lookup", {"city": "A"}, "BLOCKING"),
        RunCalls([Call("m1", "lookup", {"city": "A"})], 0),
        InputTranscript("hi", False),
        TurnComplete(None, None),
        ToolCallStarted("t1", "remind", {"text": "x"}, "NON_BLOCKING"),
        RunCalls([Call("t1", "remind", {"text": "x"})], 1),
        ToolCallSettled("m1", "lookup", "cancelled", None, 0.0, reason="cancelled by the server"),
        CancelCalls(["m1"]),
        GoAway(10.0),
        SwitchConnection(deadline=109.0),  # time left minus the 1 s margin
    ]
    assert protocol.handle == "h9"
    assert protocol.state == "going_away"


def test_go_away_during_a_batch_switches_once_answered_and_covered_by_a_handle() -> None:
    protocol = opened()
    out = protocol.receive(tool_call(("c1", "lookup", {"city": "A"})), now=1.0)
    assert of(out, RunCalls) == [RunCalls([Call("c1", "lookup", {"city": "A"})], 0)]
    out = protocol.receive(message(goAway={"timeLeft": "0.5s"}), now=2.0)
    assert of(out, SwitchConnection) == [SwitchConnection(deadline=2.0)]
    assert not protocol.switch_ready
    assert protocol.receive(message(goAway={"timeLeft": "0.1s"}), now=2.1) == [GoAway(0.1)]
    protocol.settled(ok("c1"))
    answer = protocol.next_item(now=2.2)
    assert isinstance(answer, Outgoing)
    settled = of(protocol.sent(answer, now=2.3), ToolCallSettled)
    assert [(s.call_id, s.outcome) for s in settled] == [("c1", "ok")]
    assert not protocol.switch_ready  # no handle issued since the call arrived
    protocol.receive(message(sessionResumptionUpdate={"newHandle": "h1", "resumable": True}), 3)
    assert protocol.switch_ready
    step = protocol.lost(1000, "switching over after goAway", now=3.0)
    assert step == Reconnect("go_away", 0.0)
    out = protocol.opened("s1", now=3.1)
    assert of(out, Resumed) == [Resumed("go_away", (), None)]
    assert protocol.state == "ready"


def test_interrupted_without_cancellation_keeps_the_call_and_answers_it_once() -> None:
    protocol = opened()
    protocol.receive(tool_call(("c1", "lookup", {"city": "A"})), now=1.0)
    out = protocol.receive(message(serverContent={"interrupted": True}), now=1.5)
    assert out == [Interrupted()]  # no CancelCalls: the server did not withdraw the call
    again = protocol.receive(tool_call(("c1", "lookup", {"city": "A"})), now=1.6)
    assert of(again, RunCalls) == []  # delivered again while running: not run twice
    protocol.settled(ok("c1"))
    answer = protocol.next_item(now=2.0)
    assert isinstance(answer, Outgoing)
    assert [r["id"] for r in answer.function_responses] == ["c1"]
    protocol.sent(answer, now=2.0)
    assert protocol.ledger.idle


def test_one_malformed_call_never_sinks_its_siblings(caplog: pytest.LogCaptureFixture) -> None:
    protocol = opened()
    calls = [
        {"id": "good", "name": "lookup", "args": {"city": "A"}},
        {"id": "list", "name": "lookup", "args": [1, 2]},
        {"id": 7, "name": "lookup", "args": {"city": "B"}},
        {"name": "lookup", "args": {"city": "C"}},
        {"id": "badname", "name": 12, "args": {}},
    ]
    frame = msgspec.json.encode({"toolCall": {"functionCalls": calls}})
    depth = TOO_DEEP_FOR_ANY_PYTHON
    deep_call = b'{"id":"deep","name":"lookup","args":' + b'{"a":' * depth + b"1" + b"}" * depth
    frame = frame[: -len(b"]}}")] + b"," + deep_call + b"}]}}"
    with caplog.at_level(logging.WARNING, "livebridge.live.session"):
        out = protocol.receive(wire.decode_server(frame), now=1.0)
    (run,) = of(out, RunCalls)
    assert [(c.id, c.name, c.args) for c in run.calls] == [
        ("good", "lookup", {"city": "A"}),
        ("list", "lookup", [1, 2]),  # handed on as given: the dispatcher rejects it
        # Without a usable id: admitted under the session's own key, answered by name.
        ("nameless-call-1", "lookup", {"city": "B"}),
        ("nameless-call-2", "lookup", {"city": "C"}),
        ("badname", "<not a name: 12>", {}),  # matches no tool: unknown_function
        ("deep", "lookup", wire.TOO_DEEP),  # not an object: rejected, not run
    ]
    assert len([r for r in caplog.records if "not a string (7)" in r.message]) == 1
    assert not run.partials  # answered by name: no streamed items in this batch


def test_session_end_orphans_every_running_call_and_cancels_it() -> None:
    protocol = opened()
    protocol.receive(tool_call(("c1", "lookup", {"city": "A"}), ("c2", "lookup", {"city": "B"})), 1)
    step = protocol.lost(1008, "Policy violation", now=2.0)
    assert isinstance(step, Finish)
    out = protocol.close(step.closed, now=2.0)
    settled = of(out, ToolCallSettled)
    assert [(s.call_id, s.ending) for s in settled] == [("c1", "orphaned"), ("c2", "orphaned")]
    assert all(s.reason and "Policy violation" in s.reason for s in settled)
    assert of(out, CancelCalls) == [CancelCalls(["c1", "c2"])]
    notified = [n.event for n in of(out, Notify)]
    assert [type(e) for e in notified if not isinstance(e, MessageSeen)] == [
        CallOrphaned,
        CallOrphaned,
    ]
    assert out[-1] == step.closed  # observers hear it through the shell, in their own words
    assert record_of(step.closed, "s1") == SessionClosed("s1", step.closed.reason)
    assert protocol.state == "closed"
    assert protocol.close(Closed("again"), now=3.0) == []


@pytest.mark.parametrize(
    ("code", "reason", "expected"),
    [
        (1000, "", "the service closed the session"),
        (1007, "bad", "session ended"),
        (1008, "BidiGenerateContent session not found", "session ended"),
    ],
)
def test_closes_that_end_the_session(code: int, reason: str, expected: str) -> None:
    protocol = opened()
    step = protocol.lost(code, reason, now=1.0)
    assert isinstance(step, Finish)
    assert step.closed.reason.startswith(expected)


def test_reconnects_until_the_attempts_run_out() -> None:
    protocol = GeminiLiveProtocol(
        registry(reminders=True),
        ProtocolOptions(reconnect_attempts=2),
        delays=iter([0.1, 0.2, 0.4]),
    )
    protocol.opened("s", 0.0)
    protocol.receive(message(sessionResumptionUpdate={"newHandle": "h", "resumable": True}), 0)
    assert protocol.lost(1006, "", 1.0) == Reconnect("dropped", 0.1)
    assert protocol.lost(1006, "", 2.0) == Reconnect("dropped", 0.2)
    step = protocol.lost(None, "network error: refused", 3.0)
    assert isinstance(step, Finish)
    assert step.closed.reason == "gave up after 2 reconnects"


def test_default_reconnect_delays_back_off_exponentially() -> None:
    protocol = GeminiLiveProtocol(registry(reminders=True), ProtocolOptions(reconnect_attempts=3))
    protocol.opened("s", 0.0)
    protocol.receive(message(sessionResumptionUpdate={"newHandle": "h", "resumable": True}), 0)
    first, second = protocol.lost(1006, "", 1.0), protocol.lost(1006, "", 2.0)
    assert isinstance(first, Reconnect) and 0.225 <= first.delay <= 0.275  # 0.25 s ± 10 %
    assert isinstance(second, Reconnect) and 0.45 <= second.delay <= 0.55


def test_first_connection_failure_finishes_with_an_error() -> None:
    protocol = GeminiLiveProtocol(registry(reminders=True))
    step = protocol.lost(1006, "", 0.0)
    assert isinstance(step, Finish)
    assert step.closed.error is not None
    assert protocol.state == "connecting"


def test_first_open_reports_the_session_and_counts_nothing_unobserved() -> None:
    protocol = GeminiLiveProtocol(registry(reminders=True), observed=False)
    assert protocol.opened("abc", 0.0) == []
    assert protocol.receive(message(serverContent={"turnComplete": True}), 1) == [TurnComplete()]
    observed = GeminiLiveProtocol(registry(reminders=True))
    assert observed.opened("abc", 0.0) == [Notify(SessionOpened("abc"))]


def test_audio_is_held_while_a_blocking_call_waits_and_sent_after_its_answer() -> None:
    protocol = opened()
    protocol.outbox.push(Text("before"))
    assert protocol.next_item(0.0) == Text("before")
    protocol.receive(tool_call(("c1", "lookup", {"city": "A"})), now=1.0)
    protocol.outbox.push(Audio(b"\x00\x00" * 4))
    protocol.outbox.push(Text("typed"))
    assert protocol.next_item(1.1) == Text("typed")  # audio held, text goes
    protocol.settled(ok("c1"))
    answer = protocol.next_item(1.2)
    assert isinstance(answer, Outgoing)
    protocol.sent(answer, 1.2)
    assert protocol.next_item(1.3) == Audio(b"\x00\x00" * 4)


def test_a_message_while_not_connected_is_refused_and_changes_nothing() -> None:
    protocol = GeminiLiveProtocol(registry(reminders=True))
    with pytest.raises(ConnectionStateError, match="connecting"):
        protocol.receive(message(serverContent={"turnComplete": True}), 0.0)
    assert (protocol.state, protocol.turn) == ("connecting", 0)


_EVENTS: list[ConnectionEvent] = ["open", "message", "go_away", "lost", "close"]


def _model(state: ConnectionState, event: ConnectionEvent) -> ConnectionState | None:
    """The table written out by hand: the state after ``event``, None when illegal."""
    if event == "close":
        return "closed"
    if state == "closed":
        return None
    if event == "lost":
        return "connecting"
    if state == "connecting":
        return "ready" if event == "open" else None
    if event == "open":
        return None
    if event == "go_away":
        return "going_away"
    return state


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.sampled_from(_EVENTS), max_size=40))
def test_connection_table_follows_its_model_and_refuses_without_change(
    events: list[ConnectionEvent],
) -> None:
    table = ConnectionTable()
    for event in events:
        before = table.state
        expected = _model(before, event)
        if expected is None:
            with pytest.raises(ConnectionStateError):
                table.move(event)
            assert table.state == before
        else:
            assert table.move(event) == expected


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_started_events_name_each_admitted_call_with_its_tools_behavior() -> None:
    protocol = opened()
    out = protocol.receive(
        tool_call(
            ("a", "lookup", {"city": "A"}),
            ("b", "remind", {"text": "x"}),
            ("a", "lookup", {"city": "A"}),  # repeated in one message: dropped
            ("c", "nothing", None),  # no such tool (BLOCKING), no args ({})
        ),
        now=1.0,
    )
    assert [o for o in out if isinstance(o, ToolCallStarted)] == [
        ToolCallStarted("a", "lookup", {"city": "A"}, "BLOCKING"),
        ToolCallStarted("b", "remind", {"text": "x"}, "NON_BLOCKING"),
        ToolCallStarted("c", "nothing", {}, "BLOCKING"),
    ]
    (run,) = of(out, RunCalls)
    assert [c.id for c in run.calls] == ["a", "b", "c"]
    assert protocol.ledger.state("b") == "running"
