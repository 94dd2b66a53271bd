"""``OpenAIRealtimeProtocol`` without sockets: server events and the time in, outputs out."""

from __future__ import annotations

import base64
import json
import tracemalloc
from typing import Any

import msgspec
import pytest

from livebridge.calls.call import Outcome, UnreadableArguments
from livebridge.calls.lives import Outgoing
from livebridge.calls.observers import CallOrphaned, CallSettled, MessageSeen
from livebridge.errors import (
    ConnectionLostError,
    LiveSessionError,
    MalformedMessageError,
    ServiceReportedError,
)
from livebridge.protocol.actions import (
    CancelCalls,
    Finish,
    Notify,
    Output,
    ProtocolOptions,
    Reconnect,
    RunCalls,
)
from livebridge.protocol.events import (
    AudioOut,
    Closed,
    ErrorReported,
    InputTranscript,
    Interrupted,
    OutputTranscript,
    Resumed,
    TextOut,
    ToolCallSettled,
    ToolCallStarted,
    TurnComplete,
)
from livebridge.protocol.transport import Audio, Frames, Signal, Text
from livebridge.vendors.openai import wire as openai_wire
from livebridge.vendors.openai.calls import (
    MAX_HELD_ARGUMENT_CHARS,
    MAX_HELD_CALLS,
    MAX_RESPONSE_ARGUMENT_CHARS,
)
from livebridge.vendors.openai.protocol import OpenAIRealtimeProtocol
from tests.vendors.protocol_helpers import of, registry


def event(**fields: Any) -> openai_wire.ServerEvent:
    return openai_wire.decode_server(json.dumps(fields))


def opened(**options: Any) -> OpenAIRealtimeProtocol:
    protocol = OpenAIRealtimeProtocol(
        registry(), ProtocolOptions(**options), delays=iter([0.5] * 100)
    )
    protocol.opened("sess_1", now=0.0)
    return protocol


def call_item(call_id: str, city: str = "Paris", name: str = "lookup") -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"item_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps({"city": city}),
        "status": "completed",
    }


def response(
    protocol: OpenAIRealtimeProtocol,
    response_id: str,
    *call_ids: str,
    status: str = "completed",
    reason: str | None = None,
    now: float = 1.0,
) -> list[Output]:
    """One response carrying ``call_ids`` as function_call items, the way the server streams it."""
    out = protocol.receive(event(type="response.created", response={"id": response_id}), now)
    items = [call_item(c) for c in call_ids]
    for index, item in enumerate(items):
        added = {**item, "arguments": "", "status": "in_progress"}
        out += protocol.receive(
            event(
                type="response.output_item.added",
                response_id=response_id,
                output_index=index,
                item=added,
            ),
            now,
        )
        out += protocol.receive(
            event(
                type="response.function_call_arguments.done",
                response_id=response_id,
                item_id=item["id"],
                output_index=index,
                call_id=item["call_id"],
                name=item["name"],
                arguments=item["arguments"],
            ),
            now,
        )
        out += protocol.receive(
            event(
                type="response.output_item.done",
                response_id=response_id,
                output_index=index,
                item=item,
            ),
            now,
        )
    details = {"type": status, "reason": reason} if reason else None
    done = {"id": response_id, "status": status, "status_details": details, "output": items}
    out += protocol.receive(event(type="response.done", response=done), now)
    return out


def ok(call_id: str) -> Outcome:
    return Outcome(call_id, "lookup", "ok", {"output": "sunny"}, 0.1)


def sent_kinds(protocol: OpenAIRealtimeProtocol, now: float = 2.0) -> list[str]:
    """Drain the writer: every frame's event type, in order."""
    kinds: list[str] = []
    while (item := protocol.next_item(now)) is not None:
        framed = protocol.frame(item)
        kinds += [json.loads(f)["type"] for f in openai_wire.client_frames(framed)]
        protocol.sent(item, now)
    return kinds


def test_calls_run_only_at_response_done_as_one_batch() -> None:
    protocol = opened()
    out = response(protocol, "resp_1", "c1", "c2", "c3")
    runs = of(out, RunCalls)
    assert len(runs) == 1 and [c.id for c in runs[0].calls] == ["c1", "c2", "c3"]
    assert runs[0].calls[0].args == {"city": "Paris"}
    assert runs[0].partials is False  # OpenAI takes one output per call
    assert [e.call_id for e in of(out, ToolCallStarted)] == ["c1", "c2", "c3"]
    assert not of(out, TurnComplete)  # the model's turn goes on once the outputs are in


def test_no_call_runs_before_its_response_is_done() -> None:
    protocol = opened()
    out = protocol.receive(event(type="response.created", response={"id": "r"}), 1.0)
    out += protocol.receive(
        event(
            type="response.output_item.done", response_id="r", output_index=0, item=call_item("c1")
        ),
        1.0,
    )
    assert not of(out, RunCalls) and protocol.ledger.idle


def test_three_outputs_then_exactly_one_response_create() -> None:
    protocol = opened()
    response(protocol, "resp_1", "c1", "c2", "c3")
    protocol.settled(ok("c1"))
    assert protocol.next_item(2.0) is None  # the batch goes out together
    failed = Outcome("c2", "lookup", "error", {"error": {"type": "ValueError"}}, 0.1)
    timed_out = Outcome("c3", "lookup", "timeout", {"error": {"type": "timeout"}}, 5.0)
    protocol.settled(failed)
    protocol.settled(timed_out)
    item = protocol.next_item(2.0)
    assert isinstance(item, Outgoing)
    framed = protocol.frame(item)
    assert isinstance(framed, Frames)
    messages = [json.loads(f) for f in openai_wire.client_frames(framed)]
    assert [m["item"]["call_id"] for m in messages] == ["c1", "c2", "c3"]
    assert all(m["type"] == "conversation.item.create" for m in messages)
    assert json.loads(messages[0]["item"]["output"]) == {"output": "sunny"}
    assert json.loads(messages[2]["item"]["output"])["error"]["type"] == "timeout"
    out = protocol.sent(item, 2.0)
    assert [e.outcome for e in of(out, ToolCallSettled)] == ["ok", "error", "timeout"]
    assert not protocol.idle  # a response.create is owed
    assert sent_kinds(protocol) == ["response.create"]
    assert protocol.idle and sent_kinds(protocol) == []


@pytest.mark.parametrize(
    ("status", "reason"), [("cancelled", "turn_detected"), ("incomplete", "max_output_tokens")]
)
def test_calls_of_a_response_that_did_not_complete_are_cancelled_never_run(
    status: str, reason: str
) -> None:
    protocol = opened()
    out = response(protocol, "resp_1", "c1", "c2", status=status, reason=reason)
    assert not of(out, RunCalls) and not of(out, ToolCallStarted)
    settled = of(out, ToolCallSettled)
    assert [(e.call_id, e.ending) for e in settled] == [("c1", "cancelled"), ("c2", "cancelled")]
    assert settled[0].reason == f"its response ended {status} ({reason})"
    observed = [n.event for n in of(out, Notify) if isinstance(n.event, CallSettled)]
    assert [e.outcome.kind for e in observed] == ["cancelled", "cancelled"]  # counted in metrics
    assert of(out, TurnComplete) == [TurnComplete(None, status)]  # nothing follows it
    assert protocol.idle and sent_kinds(protocol) == []
    assert all(e.fate == "cancelled" and e.outcome is None for e in settled)
    assert [(f.call_id, f.fate) for f in protocol.ledger.fates()] == [
        ("c1", "cancelled"),
        ("c2", "cancelled"),
    ]


def test_response_create_waits_for_a_response_in_progress() -> None:
    protocol = opened()
    response(protocol, "resp_1", "c1")
    protocol.receive(event(type="response.created", response={"id": "resp_2"}), 1.5)  # VAD
    protocol.settled(ok("c1"))
    assert sent_kinds(protocol) == ["conversation.item.create"]
    assert not protocol.idle
    protocol.receive(event(type="response.done", response={"id": "resp_2"}), 3.0)
    assert sent_kinds(protocol) == ["response.create"]


def acknowledged(protocol: OpenAIRealtimeProtocol, call_id: str, now: float = 2.0) -> None:
    """The server's ``conversation.item.added`` for the output of ``call_id``."""
    item = {"type": "function_call_output", "id": f"out_{call_id}", "call_id": call_id}
    protocol.receive(event(type="conversation.item.added", item=item), now)


def refused(protocol: OpenAIRealtimeProtocol, event_id: str | None, now: float = 2.5) -> None:
    error = {
        "type": "invalid_request_error",
        "code": "conversation_already_has_active_response",
        "message": "Conversation already has an active response in progress: resp_2.",
        "event_id": event_id,
    }
    protocol.receive(event(type="error", error=error), now)


def answers_out(protocol: OpenAIRealtimeProtocol, now: float = 2.0) -> None:
    item = protocol.next_item(now)
    assert isinstance(item, Outgoing)
    protocol.sent(item, now)


def test_a_response_the_server_starts_after_acknowledging_the_outputs_answers_them() -> None:
    protocol = opened()
    response(protocol, "resp_1", "c1")
    protocol.settled(ok("c1"))
    answers_out(protocol)
    acknowledged(protocol, "c1")
    protocol.receive(event(type="response.created", response={"id": "resp_2"}), 2.1)
    assert protocol.idle and sent_kinds(protocol) == []  # no second continuation


def test_a_response_the_server_started_before_the_outputs_were_in_is_followed_by_one_create() -> (
    None
):
    """Read while the outputs are being sent, before the server acknowledged them: it began
    before they were in the conversation, so it cannot answer them."""
    protocol = opened()
    response(protocol, "resp_1", "c1")
    protocol.settled(ok("c1"))
    item = protocol.next_item(2.0)
    assert isinstance(item, Outgoing)
    protocol.receive(event(type="response.created", response={"id": "resp_2"}), 2.05)
    protocol.sent(item, 2.1)
    acknowledged(protocol, "c1", 2.2)
    assert not protocol.idle and sent_kinds(protocol) == []  # held while resp_2 runs
    protocol.receive(event(type="response.done", response={"id": "resp_2"}), 3.0)
    assert sent_kinds(protocol) == ["response.create"]
    assert protocol.idle and sent_kinds(protocol) == []


def test_a_refused_continuation_is_sent_again_once_the_active_response_ends() -> None:
    """Voice detection started a response before the outputs arrived; the client's create
    crossed it and was refused: the model must still answer the results."""
    protocol = opened()
    response(protocol, "resp_1", "c1", "c2")
    protocol.settled(ok("c1"))
    protocol.settled(Outcome("c2", "lookup", "ok", {"output": "rain"}, 0.1))
    item = protocol.next_item(2.0)
    assert isinstance(item, Outgoing)
    protocol.sent(item, 2.0)
    create = protocol.next_item(2.0)
    assert isinstance(create, Frames) and create.kind == "response.create"
    event_id = create.messages[0].get("event_id")
    protocol.sent(create, 2.0)
    protocol.receive(event(type="response.created", response={"id": "resp_2"}), 2.1)  # VAD
    acknowledged(protocol, "c1", 2.2)
    acknowledged(protocol, "c2", 2.2)
    refused(protocol, event_id)
    assert not protocol.idle and sent_kinds(protocol) == []  # not while resp_2 runs
    protocol.receive(event(type="response.done", response={"id": "resp_2"}), 3.0)
    assert sent_kinds(protocol) == ["response.create"]  # exactly one more
    protocol.receive(event(type="response.created", response={"id": "resp_3"}), 3.1)
    protocol.receive(event(type="response.done", response={"id": "resp_3"}), 3.5)
    assert protocol.idle and sent_kinds(protocol) == []
    assert protocol.active_response_errors == 1


def test_a_refused_continuation_is_not_sent_again_when_the_active_response_saw_the_outputs() -> (
    None
):
    protocol = opened()
    response(protocol, "resp_1", "c1")
    protocol.settled(ok("c1"))
    answers_out(protocol)
    create = protocol.next_item(2.0)
    assert isinstance(create, Frames)
    protocol.sent(create, 2.0)
    acknowledged(protocol, "c1", 2.1)
    protocol.receive(event(type="response.created", response={"id": "resp_2"}), 2.2)
    refused(protocol, create.messages[0]["event_id"])
    protocol.receive(event(type="response.done", response={"id": "resp_2"}), 3.0)
    assert protocol.idle and sent_kinds(protocol) == []


def test_the_apps_own_refused_create_is_not_a_continuation() -> None:
    protocol = opened()
    refused(protocol, "evt_app")
    protocol.receive(event(type="response.done", response={"id": "resp_2"}), 3.0)
    assert protocol.idle and sent_kinds(protocol) == []
    assert protocol.active_response_errors == 1


def test_active_response_error_is_tolerated_and_counted() -> None:
    protocol = opened()
    error = {
        "type": "invalid_request_error",
        "code": "conversation_already_has_active_response",
        "message": "Conversation already has an active response",
    }
    out = protocol.receive(event(type="error", error=error), 1.0)
    assert not of(out, ErrorReported) and protocol.active_response_errors == 1
    assert protocol.state == "ready"
    protocol.close(Closed("done"), 2.0)


def test_other_errors_become_session_events_with_a_clear_message() -> None:
    protocol = opened()
    error = {
        "type": "invalid_request_error",
        "code": "input_audio_buffer_commit_empty",
        "message": "buffer too small",
        "param": None,
    }
    out = protocol.receive(event(type="error", error=error), 1.0)
    (reported,) = of(out, ErrorReported)
    assert isinstance(reported.error, ServiceReportedError)
    assert reported.error.code == "input_audio_buffer_commit_empty"
    assert "buffer too small" in str(reported.error) and "Send audio" in str(reported.error)


def test_barge_in_interrupts_playback_and_running_calls_keep_running() -> None:
    protocol = opened()
    response(protocol, "resp_1", "c1")
    out = protocol.receive(
        event(type="input_audio_buffer.speech_started", audio_start_ms=120, item_id="u1"), 1.5
    )
    assert of(out, Interrupted) and not of(out, CancelCalls)
    protocol.settled(ok("c1"))
    assert sent_kinds(protocol) == ["conversation.item.create", "response.create"]


def test_media_events_become_the_same_session_events_as_gemini() -> None:
    protocol = opened()
    pcm = b"\x01\x02" * 4
    out = protocol.receive(
        event(type="response.output_audio.delta", delta=base64.b64encode(pcm).decode()), 1.0
    )
    out += protocol.receive(event(type="response.output_text.delta", delta="hi"), 1.0)
    out += protocol.receive(event(type="response.output_audio_transcript.delta", delta="he"), 1.0)
    out += protocol.receive(
        event(type="conversation.item.input_audio_transcription.delta", item_id="u", delta="wh"),
        1.0,
    )
    out += protocol.receive(
        event(
            type="conversation.item.input_audio_transcription.completed",
            item_id="u",
            transcript="what",
        ),
        1.0,
    )
    out += protocol.receive(
        event(type="conversation.item.input_audio_transcription.completed", transcript="once"), 1.0
    )
    out += protocol.receive(
        event(
            type="response.done",
            response={"id": "r", "status": "completed", "usage": {"total_tokens": 3}},
        ),
        1.0,
    )
    events = [o for o in out if not isinstance(o, Notify)]
    assert events == [
        AudioOut(pcm, 24_000),
        TextOut("hi"),
        OutputTranscript("he"),
        InputTranscript("wh"),
        InputTranscript("", True),
        InputTranscript("once", True),
        TurnComplete({"total_tokens": 3}, "completed"),
    ]
    assert protocol.turn == 1


def test_unknown_events_are_ignored_and_malformed_ones_raise() -> None:
    protocol = opened()
    out = protocol.receive(event(type="rate_limits.updated", rate_limits=[{"name": "x"}]), 1.0)
    assert [o for o in out if not isinstance(o, Notify)] == []
    for frame in (b"not json", b'{"no_type": 1}', b'{"type": "x", "delta": 5}', b"[1]"):
        with pytest.raises(MalformedMessageError, match="not an OpenAI Realtime event"):
            openai_wire.decode_server(frame)


def test_a_drop_reconnects_to_a_fresh_conversation_and_orphans_open_calls() -> None:
    protocol = opened()
    response(protocol, "resp_1", "c1")
    protocol.receive(event(type="response.created", response={"id": "resp_2"}), 1.0)
    protocol.receive(
        event(
            type="response.output_item.done",
            response_id="resp_2",
            output_index=0,
            item=call_item("c2"),
        ),
        1.0,
    )
    step = protocol.lost(1006, "", 2.0)
    assert isinstance(step, Reconnect) and step.reason == "dropped"
    protocol.settled(ok("c1"))  # the handler ends while no socket is open
    assert protocol.next_item(2.5) is None
    out = protocol.opened("sess_2", 3.0)
    (resumed,) = of(out, Resumed)
    assert resumed.fresh and set(resumed.orphaned) == {"c1", "c2"}
    assert isinstance(resumed.error, ConnectionLostError)
    assert "empty conversation" in str(resumed.error)
    orphaned = {e.call_id: e.reason for e in of(out, ToolCallSettled)}
    assert set(orphaned) == {"c1", "c2"}
    assert "cannot resume" in orphaned["c1"] and "before the call's response" in orphaned["c2"]
    assert len([n for n in of(out, Notify) if isinstance(n.event, CallOrphaned)]) == 2
    assert protocol.idle and sent_kinds(protocol) == []  # nothing is owed to the new conversation
    # The call its response never finished is orphaned by the ledger, as every other call.
    assert [(f.call_id, f.fate) for f in protocol.ledger.fates()] == [
        ("c1", "orphaned"),
        ("c2", "orphaned"),
    ]
    assert all(e.fate == "orphaned" and e.outcome is None for e in of(out, ToolCallSettled))


def test_closing_orphans_the_calls_of_a_response_not_done_through_the_ledger() -> None:
    protocol = opened()
    protocol.receive(event(type="response.created", response={"id": "resp_1"}), 1.0)
    protocol.receive(
        event(
            type="response.output_item.done",
            response_id="resp_1",
            output_index=0,
            item=call_item("c1"),
        ),
        1.0,
    )
    out = protocol.close(Closed("closed by the app"), 2.0)
    (settled,) = of(out, ToolCallSettled)
    assert (settled.call_id, settled.fate, settled.outcome) == ("c1", "orphaned", None)
    assert "closed by the app" in (settled.reason or "")
    assert [n.event.call_id for n in of(out, Notify) if isinstance(n.event, CallOrphaned)] == ["c1"]
    (fate,) = protocol.ledger.fates()
    assert (fate.call_id, fate.fate, fate.reason) == ("c1", "orphaned", settled.reason)


def test_a_drop_after_the_answers_drops_the_owed_response_create() -> None:
    protocol = opened()
    response(protocol, "resp_1", "c1")
    protocol.settled(ok("c1"))
    item = protocol.next_item(2.0)
    assert isinstance(item, Outgoing)
    protocol.sent(item, 2.0)
    assert isinstance(protocol.lost(None, "network error", 2.5), Reconnect)
    protocol.opened("sess_2", 3.0)
    assert protocol.idle and sent_kinds(protocol) == []


@pytest.mark.parametrize(
    ("code", "reason", "text"),
    [
        (1000, "", None),
        (1008, "invalid key", "refused the session"),
        (4000, "beta_api_shape_disabled", "GA session shape"),
    ],
)
def test_closes_that_end_the_session(code: int, reason: str, text: str | None) -> None:
    protocol = opened()
    step = protocol.lost(code, reason, 1.0)
    assert isinstance(step, Finish)
    if text is None:
        assert step.closed.error is None
    else:
        assert isinstance(step.closed.error, LiveSessionError) and text in str(step.closed.error)


def test_reconnects_give_up_after_the_attempt_limit() -> None:
    protocol = opened(reconnect_attempts=2)
    assert isinstance(protocol.lost(1011, "boom", 1.0), Reconnect)
    protocol.opened(None, 2.0)
    assert isinstance(protocol.lost(1006, "", 3.0), Reconnect)
    assert isinstance(protocol.lost(1006, "", 4.0), Reconnect)
    step = protocol.lost(1006, "", 5.0)
    assert isinstance(step, Finish) and "gave up" in step.closed.reason


def test_a_result_too_large_for_one_frame_is_answered_with_an_error() -> None:
    protocol = opened(max_frame_bytes=2048)
    response(protocol, "resp_1", "c1")
    protocol.settled(Outcome("c1", "lookup", "ok", {"output": '"' * 1500}, 0.1))
    item = protocol.next_item(2.0)
    assert isinstance(item, Outgoing)
    (message,) = item.function_responses
    payload = json.loads(message["item"]["output"])
    assert payload["error"]["type"] == "result_too_large"
    (settled,) = of(protocol.sent(item, 2.0), ToolCallSettled)
    assert settled.outcome == "error"


def test_session_closing_orphans_running_calls() -> None:
    protocol = opened()
    response(protocol, "resp_1", "c1")
    out = protocol.close(Closed("closed by the app"), 2.0)
    assert of(out, CancelCalls) == [CancelCalls(["c1"])]
    (settled,) = of(out, ToolCallSettled)
    assert settled.ending == "orphaned" and "closed by the app" in (settled.reason or "")
    assert out[-1] == Closed("closed by the app")  # the last word; observers get its view


def test_audio_is_24_khz_only() -> None:
    protocol = opened()
    assert protocol.input_rate(None) == 24_000 == protocol.input_rate(24_000)
    with pytest.raises(ValueError, match="resample"):
        protocol.input_rate(16_000)


def test_client_frames() -> None:
    (append,) = openai_wire.client_frames(Audio(b"\x00\x01", 24_000))
    assert json.loads(append) == {"audio": "AAE=", "type": "input_audio_buffer.append"}
    text = [json.loads(f) for f in openai_wire.client_frames(Text("hi"))]
    assert [m["type"] for m in text] == ["conversation.item.create", "response.create"]
    assert text[0]["item"]["content"] == [{"type": "input_text", "text": "hi"}]
    ends = [json.loads(f)["type"] for f in openai_wire.client_frames(Signal("activity_end"))]
    assert ends == ["input_audio_buffer.commit", "response.create"]
    assert openai_wire.client_frames(Signal("activity_start")) == []


def test_messages_are_counted_by_event_type() -> None:
    protocol = opened()
    out = response(protocol, "resp_1", "c1")
    seen = {
        (n.event.direction, n.event.kind): n.event.count
        for n in of(out, Notify)
        if isinstance(n.event, MessageSeen)
    }
    assert seen[("received", "response.done")] == 1
    assert seen[("received", "response.function_call_arguments.done")] == 1


def done_with(protocol: OpenAIRealtimeProtocol, frame: str | bytes) -> list[Output]:
    protocol.receive(event(type="response.created", response={"id": "r"}), 1.0)
    return protocol.receive(openai_wire.decode_server(frame), 1.0)


def test_arguments_that_are_not_json_are_answered_as_not_valid_json() -> None:
    protocol = opened()
    item = {**call_item("c1"), "arguments": "{not json"}
    out = done_with(
        protocol, json.dumps({"type": "response.done", "response": {"id": "r", "output": [item]}})
    )
    (run,) = of(out, RunCalls)
    (call,) = run.calls
    assert isinstance(call.args, UnreadableArguments)
    assert call.args.reason.startswith("the arguments are not valid JSON")


LONE_SURROGATE_ARGUMENTS = '{"city": "Par\ud800is"}'  # a str msgspec cannot encode to read


@pytest.mark.parametrize("reader", ["wire", "sdk"])
def test_a_lone_surrogate_in_one_calls_arguments_fails_that_call_alone(reader: str) -> None:
    """The wire decoder refused the whole ``response.done`` for it; the SDK's models passed it
    on and reading the arguments raised after the calls were taken, leaving them no fate."""
    protocol = opened()
    bad = {**call_item("c2"), "arguments": LONE_SURROGATE_ARGUMENTS}
    done = {"type": "response.done", "response": {"id": "r", "output": [call_item("c1"), bad]}}
    protocol.receive(event(type="response.created", response={"id": "r"}), 1.0)
    if reader == "wire":
        message = openai_wire.decode_server(json.dumps(done))  # the escape \ud800 on the wire
    else:
        message = msgspec.convert(done, openai_wire.ServerEvent)  # as the SDK's models give it
    out = protocol.receive(message, 1.0)
    (run,) = of(out, RunCalls)
    assert [c.id for c in run.calls] == ["c1", "c2"]
    assert run.calls[0].args == {"city": "Paris"}  # the sibling runs
    assert isinstance(run.calls[1].args, UnreadableArguments)
    assert "not valid Unicode" in run.calls[1].args.reason


def test_text_that_is_not_valid_unicode_reaches_the_app_mended() -> None:
    frame = '{"type": "response.output_text.delta", "delta": "ok\\ud800"}'
    message = openai_wire.decode_server(frame)
    assert message.delta == "ok\ufffd"


# -- one fate per call, whatever the server repeats or omits -----------------------------------


def settled_ids(outputs: list[Output]) -> list[str]:
    return [e.call_id for e in of(outputs, ToolCallSettled)]


def test_a_second_response_done_for_a_running_call_gives_it_no_second_fate() -> None:
    protocol = opened()
    out = response(protocol, "resp_1", "c1")
    assert len(of(out, RunCalls)) == 1
    cancelled = {"id": "resp_1", "status": "cancelled", "output": [call_item("c1")]}
    out += protocol.receive(event(type="response.done", response=cancelled), 1.5)
    protocol.settled(ok("c1"))
    item = protocol.next_item(2.0)
    assert isinstance(item, Outgoing)
    out += protocol.sent(item, 2.0)
    out += protocol.close(Closed("done"), 3.0)
    assert settled_ids(out) == ["c1"]
    assert [e.outcome for e in of(out, ToolCallSettled)] == ["ok"]


def test_a_repeated_response_done_never_runs_nor_answers_a_call_again() -> None:
    protocol = opened()
    out = response(protocol, "resp_1", "c1")
    protocol.settled(ok("c1"))
    assert sent_kinds(protocol) == ["conversation.item.create", "response.create"]
    done = {"id": "resp_1", "status": "completed", "output": [call_item("c1")]}
    out += protocol.receive(event(type="response.done", response=done), 2.5)
    assert len(of(out, RunCalls)) == 1 and sent_kinds(protocol) == []


@pytest.mark.parametrize("listed", [True, False], ids=["with_output", "without_output"])
def test_a_response_done_without_an_id_ends_the_response_in_progress(listed: bool) -> None:
    protocol = opened()
    out = protocol.receive(event(type="response.created", response={"id": "resp_1"}), 1.0)
    out += protocol.receive(
        event(
            type="response.output_item.done",
            response_id="resp_1",
            output_index=0,
            item=call_item("c1"),
        ),
        1.0,
    )
    done = {"status": "completed", "output": [call_item("c1")] if listed else []}
    out += protocol.receive(event(type="response.done", response=done), 1.1)
    (run,) = of(out, RunCalls)
    assert [c.id for c in run.calls] == ["c1"]
    protocol.settled(ok("c1"))
    item = protocol.next_item(2.0)
    assert isinstance(item, Outgoing)
    out += protocol.sent(item, 2.0)
    assert sent_kinds(protocol) == ["response.create"]
    out += protocol.close(Closed("done"), 3.0)
    assert [e.outcome for e in of(out, ToolCallSettled)] == ["ok"]  # never orphaned as well


def test_a_call_id_reused_for_other_arguments_is_answered_as_a_protocol_error() -> None:
    protocol = opened()
    response(protocol, "resp_1", "c1")
    protocol.settled(ok("c1"))
    assert sent_kinds(protocol) == ["conversation.item.create", "response.create"]
    protocol.receive(event(type="response.created", response={"id": "resp_2"}), 3.0)
    other = call_item("c1", city="Rome")
    done = {"id": "resp_2", "status": "completed", "output": [call_item("c2"), other]}
    out = protocol.receive(event(type="response.done", response=done), 3.0)
    (run,) = of(out, RunCalls)
    assert [c.id for c in run.calls] == ["c2"]  # the reused id never reaches the dispatcher
    protocol.settled(Outcome("c2", "lookup", "ok", {"output": "rain"}, 0.1))
    item = protocol.next_item(3.5)
    assert isinstance(item, Outgoing)
    answers = {
        r["item"]["call_id"]: json.loads(r["item"]["output"]) for r in item.function_responses
    }
    assert answers["c2"] == {"output": "rain"}
    assert answers["c1"]["error"]["type"] == "call_id_reused"  # not c1's first answer
    assert "reused call_id c1" in answers["c1"]["error"]["message"]
    settled = of(protocol.sent(item, 3.5), ToolCallSettled)
    assert sorted((e.call_id, e.outcome) for e in settled) == [("c1", "rejected"), ("c2", "ok")]


def test_a_call_id_reused_while_its_call_runs_is_reported_and_not_answered_twice() -> None:
    protocol = opened()
    response(protocol, "resp_1", "c1")
    protocol.receive(event(type="response.created", response={"id": "resp_2"}), 1.5)
    done = {"id": "resp_2", "status": "completed", "output": [call_item("c1", city="Rome")]}
    out = protocol.receive(event(type="response.done", response=done), 1.5)
    assert not of(out, RunCalls) and not of(out, ToolCallSettled)
    (reported,) = of(out, ErrorReported)
    assert "reused call_id c1" in str(reported.error)
    protocol.settled(ok("c1"))
    assert sent_kinds(protocol) == ["conversation.item.create", "response.create"]


# -- bounded: responses that never finish ---------------------------------------------------------


def arguments_of(size: int) -> str:
    return json.dumps({"city": "x" * (size - 12)})


def open_response(
    protocol: OpenAIRealtimeProtocol, response_id: str, call_id: str, arguments: str
) -> None:
    protocol.receive(event(type="response.created", response={"id": response_id}), 1.0)
    protocol.receive(
        event(
            type="response.function_call_arguments.done",
            response_id=response_id,
            output_index=0,
            call_id=call_id,
            name="lookup",
            arguments=arguments,
        ),
        1.0,
    )


def test_responses_that_never_finish_hold_bounded_arguments() -> None:
    protocol = opened()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(60):  # 60 responses of one 2 MB call each, none ever done
            open_response(protocol, f"r{n}", f"c{n}", arguments_of(2_000_000))
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 1_000_000  # each is over the bound for one response: none is held
    assert protocol.calls.held_chars == 0
    near = MAX_RESPONSE_ARGUMENT_CHARS - 100
    for n in range(60, 70):
        open_response(protocol, f"r{n}", f"c{n}", arguments_of(near))
    assert protocol.calls.held_chars <= MAX_HELD_ARGUMENT_CHARS
    assert protocol.calls.held_chars == near * (MAX_HELD_ARGUMENT_CHARS // near)
    out = protocol.close(Closed("done"), 5.0)
    assert len(settled_ids(out)) == 70 and protocol.calls.held_chars == 0  # one fate each


def test_a_call_over_the_bounds_fails_alone_with_a_fate_that_says_why() -> None:
    protocol = opened()
    open_response(protocol, "r1", "c1", arguments_of(MAX_RESPONSE_ARGUMENT_CHARS + 1))
    protocol.receive(
        event(
            type="response.output_item.done",
            response_id="r1",
            output_index=1,
            item=call_item("c2"),
        ),
        1.0,
    )
    out = protocol.receive(event(type="response.done", response={"id": "r1"}), 1.5)
    (run,) = of(out, RunCalls)
    big, small = run.calls
    assert small.args == {"city": "Paris"}
    assert isinstance(big.args, UnreadableArguments)
    assert f"{MAX_RESPONSE_ARGUMENT_CHARS:,} at most" in big.args.reason


def test_calls_past_the_held_count_are_withdrawn_at_once() -> None:
    protocol = opened()
    protocol.receive(event(type="response.created", response={"id": "r"}), 1.0)
    out: list[Output] = []
    for n in range(MAX_HELD_CALLS + 2):
        item = {**call_item(f"c{n}"), "arguments": ""}
        out += protocol.receive(
            event(type="response.output_item.added", response_id="r", output_index=n, item=item),
            1.0,
        )
    withdrawn = of(out, ToolCallSettled)
    assert [e.call_id for e in withdrawn] == [f"c{MAX_HELD_CALLS}", f"c{MAX_HELD_CALLS + 1}"]
    assert all(e.ending == "cancelled" for e in withdrawn)
    assert len(protocol.calls) == MAX_HELD_CALLS
    out = protocol.receive(
        event(type="response.done", response={"id": "r", "status": "cancelled"}), 2.0
    )
    assert len(of(out, ToolCallSettled)) == MAX_HELD_CALLS  # the rest, once each


def test_a_later_refusal_of_the_apps_own_create_is_not_taken_for_the_continuations() -> None:
    protocol = opened()
    response(protocol, "resp_1", "c1")
    protocol.settled(ok("c1"))
    assert sent_kinds(protocol) == ["conversation.item.create", "response.create"]
    protocol.receive(event(type="response.created", response={"id": "resp_2"}), 2.1)
    protocol.receive(event(type="response.done", response={"id": "resp_2"}), 2.5)
    protocol.receive(event(type="response.created", response={"id": "resp_3"}), 3.0)  # VAD
    refused(protocol, None, 3.1)  # the app's text, sent meanwhile, names no event
    protocol.receive(event(type="response.done", response={"id": "resp_3"}), 3.5)
    assert protocol.idle and sent_kinds(protocol) == []
