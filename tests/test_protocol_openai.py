"""``OpenAIRealtimeProtocol`` without sockets: server events and the time in, outputs out."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from livebridge import ToolRegistry, openai_wire
from livebridge.calls import Outcome
from livebridge.errors import (
    ConnectionLostError,
    LiveSessionError,
    MalformedMessageError,
    ServiceReportedError,
)
from livebridge.events import (
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
from livebridge.ledger import Outgoing
from livebridge.observe import CallOrphaned, CallSettled, MessageSeen
from livebridge.protocol import (
    CancelCalls,
    Finish,
    Notify,
    OpenAIRealtimeProtocol,
    Output,
    ProtocolOptions,
    Reconnect,
    RunCalls,
)
from livebridge.transport import Audio, Frames, Signal, Text


def registry() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool
    async def lookup(city: str) -> str:
        """Look a city up."""
        return city

    return tools


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


def of(outputs: list[Output], kind: type[Any]) -> list[Any]:
    return [o for o in outputs if isinstance(o, kind)]


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
    assert [(e.call_id, e.outcome) for e in settled] == [("c1", "cancelled"), ("c2", "cancelled")]
    assert settled[0].reason == f"its response ended {status} ({reason})"
    observed = [n.event for n in of(out, Notify) if isinstance(n.event, CallSettled)]
    assert [e.outcome.kind for e in observed] == ["cancelled", "cancelled"]  # counted in metrics
    assert of(out, TurnComplete) == [TurnComplete(None, status)]  # nothing follows it
    assert protocol.idle and sent_kinds(protocol) == []


def test_response_create_waits_for_a_response_in_progress() -> None:
    protocol = opened()
    response(protocol, "resp_1", "c1")
    protocol.receive(event(type="response.created", response={"id": "resp_2"}), 1.5)  # VAD
    protocol.settled(ok("c1"))
    assert sent_kinds(protocol) == ["conversation.item.create"]
    assert not protocol.idle
    protocol.receive(event(type="response.done", response={"id": "resp_2"}), 3.0)
    assert sent_kinds(protocol) == ["response.create"]


def test_a_response_the_server_starts_after_the_outputs_answers_them() -> None:
    protocol = opened()
    response(protocol, "resp_1", "c1")
    protocol.settled(ok("c1"))
    item = protocol.next_item(2.0)
    assert isinstance(item, Outgoing)
    protocol.sent(item, 2.0)
    protocol.receive(event(type="response.created", response={"id": "resp_2"}), 2.1)
    assert protocol.idle and sent_kinds(protocol) == []  # no second continuation


def test_a_response_the_server_starts_while_the_outputs_are_being_sent_answers_them() -> None:
    """The reader can take ``response.created`` before the writer's send of the outputs
    returns: that response answers them too, and no ``response.create`` follows."""
    protocol = opened()
    response(protocol, "resp_1", "c1")
    protocol.settled(ok("c1"))
    item = protocol.next_item(2.0)
    assert isinstance(item, Outgoing)
    protocol.receive(event(type="response.created", response={"id": "resp_2"}), 2.05)
    protocol.receive(event(type="response.done", response={"id": "resp_2"}), 2.08)
    protocol.sent(item, 2.1)
    assert protocol.idle and sent_kinds(protocol) == []


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
    assert settled.outcome == "orphaned" and "closed by the app" in (settled.reason or "")
    assert out[-2] == Closed("closed by the app")


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


def test_invalid_arguments_json_is_handed_on_for_the_dispatcher_to_reject() -> None:
    protocol = opened()
    protocol.receive(event(type="response.created", response={"id": "r"}), 1.0)
    item = {**call_item("c1"), "arguments": "{not json"}
    out = protocol.receive(
        event(type="response.done", response={"id": "r", "status": "completed", "output": [item]}),
        1.0,
    )
    (run,) = of(out, RunCalls)
    assert run.calls[0].args == "{not json"  # answered invalid_arguments by the dispatcher
