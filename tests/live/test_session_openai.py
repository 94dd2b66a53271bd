"""``LiveSession`` over OpenAI Realtime: the official ``openai`` SDK, the emulator, real TLS."""

from __future__ import annotations

import asyncio
import json
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import pytest
from prometheus_client import CollectorRegistry

import livebridge
from livebridge import LiveSession, SessionOptions, ToolError
from livebridge.calls.observers import MessageSeen, Recorder
from livebridge.emulator import Conversation, Emulator
from livebridge.observe.metrics import PrometheusObserver
from livebridge.protocol.events import (
    ErrorReported,
    Interrupted,
    Resumed,
    TextOut,
    ToolCallSettled,
    ToolCallStarted,
    TurnComplete,
)
from livebridge.protocol.transport import TransportKind
from tests.support.gemini_sessions import collect_until, errors, of_type

MODEL = "gpt-realtime"
TEXT = {"output_modalities": ["text"]}


def open_session(
    emu: Emulator, tools: livebridge.ToolRegistry, **settings: Any
) -> AbstractAsyncContextManager[LiveSession]:
    return LiveSession.connect(
        emu.openai_client(), model=MODEL, tools=tools, config=TEXT, **settings
    )


def client_events(emu: Emulator, kind: str) -> list[dict[str, Any]]:
    return [
        entry.message
        for entry in emu.transcript
        if entry.direction == "client" and entry.message.get("type") == kind
    ]


def outputs(emu: Emulator) -> dict[str, dict[str, Any]]:
    """Every ``function_call_output`` the client sent, by call id, its payload decoded."""
    found: dict[str, dict[str, Any]] = {}
    for message in client_events(emu, "conversation.item.create"):
        item = message["item"]
        if item.get("type") == "function_call_output":
            assert item["call_id"] not in found, f"second output for {item['call_id']}"
            found[item["call_id"]] = json.loads(item["output"])
    return found


def creates_after_outputs(emu: Emulator) -> int:
    """``response.create`` events sent after the first ``function_call_output``."""
    seen_output = False
    count = 0
    for entry in emu.transcript:
        if entry.direction != "client":
            continue
        message = entry.message
        item = message.get("item") or {}
        if message.get("type") == "conversation.item.create":
            seen_output = seen_output or item.get("type") == "function_call_output"
        elif message.get("type") == "response.create" and seen_output:
            count += 1
    return count


def registry() -> livebridge.ToolRegistry:
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def get_weather(city: str) -> dict[str, str]:
        """Weather for a city."""
        return {"city": city, "sky": "sunny"}

    @tools.tool
    async def book(city: str) -> str:
        """Book a trip."""
        raise ToolError(f"no seats to {city}")

    @tools.tool(timeout=0.3)
    async def slow_search(query: str) -> str:
        """A search that never finishes in time."""
        await anyio.sleep_forever()
        return query

    return tools


async def test_three_parallel_calls_one_failing_one_timing_out() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids = await conv.tool_call(
            [
                ("get_weather", {"city": "Paris"}),
                ("book", {"city": "Rome"}),
                ("slow_search", {"query": "x"}),
            ]
        )
        await conv.wait_answers(ids, timeout=30)
        await conv.say("done")
        await conv.turn_complete()

    metrics = CollectorRegistry()
    observer = PrometheusObserver(metrics)
    async with (
        Emulator(scenario, protocol="openai") as emu,
        open_session(emu, registry(), observers=[observer]) as session,
    ):
        await session.send_text("plan my trip")
        events = await collect_until(session, lambda e: isinstance(e, TurnComplete))
    settled = {e.name: e for e in of_type(events, ToolCallSettled)}
    assert {name: e.ending for name, e in settled.items()} == {
        "get_weather": "ok",
        "book": "error",
        "slow_search": "timeout",
    }
    sent = outputs(emu)
    assert len(sent) == 3
    assert sent[settled["get_weather"].call_id] == {"output": {"city": "Paris", "sky": "sunny"}}
    assert sent[settled["book"].call_id]["error"]["message"] == "no seats to Rome"
    assert sent[settled["slow_search"].call_id]["error"]["type"] == "timeout"
    assert creates_after_outputs(emu) == 1
    assert TextOut("done") in events
    assert errors(emu) == []

    def sample(name: str, **labels: str) -> float | None:
        return metrics.get_sample_value(name, labels)

    assert sample("livebridge_messages_total", direction="sent", type="response.create") == 2
    assert sample("livebridge_messages_total", direction="received", type="response.done") == 2
    calls = "livebridge_tool_calls_total"
    assert sample(calls, function="book", outcome="error", behavior="BLOCKING") == 1
    assert sample(calls, function="slow_search", outcome="timeout", behavior="BLOCKING") == 1


async def test_calls_of_a_cancelled_response_are_never_run_nor_answered() -> None:
    ran: list[str] = []
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def transfer(amount: int) -> str:
        """Move money."""
        ran.append("transfer")
        return "moved"

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids = await conv.tool_call([("transfer", {"amount": 5}), ("transfer", {"amount": 7})])
        await conv.cancel(ids)  # the response ends cancelled (turn_detected)
        await conv.expect_turn()
        await conv.say("never mind")
        await conv.turn_complete()

    async with Emulator(scenario, protocol="openai") as emu, open_session(emu, tools) as session:
        await session.send_text("pay")
        events = await collect_until(session, lambda e: isinstance(e, TurnComplete))
        last = events[-1]
        assert isinstance(last, TurnComplete) and last.reason == "cancelled"
        await session.send_text("so?")
        events += await collect_until(session, lambda e: e == TextOut("never mind"))
    cancelled = of_type(events, ToolCallSettled)
    assert [e.ending for e in cancelled] == ["cancelled", "cancelled"]
    assert all("cancelled (turn_detected)" in (e.reason or "") for e in cancelled)
    assert not of_type(events, ToolCallStarted) and ran == []
    assert outputs(emu) == {} and creates_after_outputs(emu) == 0
    assert errors(emu) == []


async def test_the_active_response_error_is_tolerated_and_counted() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids = await conv.tool_call([("get_weather", {"city": "Oslo"})])
        await conv.wait_answers(ids, timeout=30)  # then the server starts a response itself
        # ... which the client's response.create meets: hold it until that create is in
        await conv.realtime.wait_until(lambda: len(client_events(emu, "response.create")) > 1, 30)
        await conv.say("cold")
        await conv.turn_complete()

    recorder = Recorder()
    async with (
        Emulator(scenario, protocol="openai", auto_response=True) as emu,
        open_session(emu, registry(), observers=[recorder]) as session,
    ):
        await session.send_text("weather?")
        events = await collect_until(session, lambda e: isinstance(e, TurnComplete))
    assert TextOut("cold") in events
    refused = [
        e.count
        for e in recorder.of(MessageSeen)
        if e.kind == "error.conversation_already_has_active_response"
    ]
    assert refused == [1]
    assert not of_type(events, ErrorReported)
    assert [e.outcome for e in of_type(events, ToolCallSettled)] == ["ok"]
    assert errors(emu) == []


async def test_barge_in_during_a_call_interrupts_and_the_call_is_still_answered() -> None:
    gate = anyio.Event()
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def lookup(city: str) -> str:
        """Look a city up."""
        await gate.wait()  # still running when the user barges in
        return f"{city} found"

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids = await conv.tool_call([("lookup", {"city": "Lima"})])
        await conv.turn_complete()  # the response with the call ends completed: the call runs
        await conv.send(
            {"type": "input_audio_buffer.speech_started", "audio_start_ms": 0, "item_id": "u1"}
        )
        await conv.wait_answers(ids, timeout=30)
        await conv.say("found it")
        await conv.turn_complete()

    async with Emulator(scenario, protocol="openai") as emu, open_session(emu, tools) as session:
        await session.send_text("find Lima")
        events = await collect_until(session, lambda e: isinstance(e, Interrupted))
        assert of_type(events, ToolCallStarted) and not of_type(events, ToolCallSettled)
        gate.set()
        events += await collect_until(session, lambda e: e == TextOut("found it"))
    (settled,) = of_type(events, ToolCallSettled)
    assert settled.outcome == "ok"
    assert outputs(emu) == {settled.call_id: {"output": "Lima found"}}
    assert creates_after_outputs(emu) == 1
    assert errors(emu) == []


async def test_bad_server_input_is_skipped_and_the_session_goes_on() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.send_raw(b"this is not json")
        await conv.send({"type": "response.output_text.delta", "delta": 42})
        await conv.send({"type": "a.future.event", "detail": {"x": 1}})
        await conv.send({"no_type": True})
        call_id = await conv.tool_call_raw("get_weather", "{not json")
        await conv.wait_answers([call_id], timeout=30)
        await conv.say("still here")
        await conv.turn_complete()

    async with (
        Emulator(scenario, protocol="openai") as emu,
        open_session(emu, registry()) as session,
    ):
        await session.send_text("hello")
        events = await collect_until(session, lambda e: e == TextOut("still here"))
    (settled,) = of_type(events, ToolCallSettled)
    assert settled.outcome == "rejected"
    error = outputs(emu)[settled.call_id]["error"]
    assert error["type"] == "invalid_arguments"
    assert "not valid JSON" in error["message"] and "not str" not in error["message"]
    assert errors(emu) == []


@pytest.mark.parametrize("transport", ["wire", "sdk"])
async def test_a_lone_surrogate_in_one_calls_arguments_fails_that_call_alone(
    transport: TransportKind,
) -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids = await conv.realtime.issue_calls(
            "model",
            [("get_weather", {"city": "Paris"}), ("get_weather", '{"city": "Par\ud800is"}')],
        )
        await conv.wait_answers(ids, timeout=30)
        await conv.say("done")
        await conv.turn_complete()

    options = SessionOptions(transport=transport)
    async with (
        Emulator(scenario, protocol="openai") as emu,
        open_session(emu, registry(), options=options) as session,
    ):
        await session.send_text("weather?")
        events = await collect_until(session, lambda e: e == TextOut("done"))
    good, bad = of_type(events, ToolCallSettled)
    assert (good.outcome, bad.outcome) == ("ok", "rejected")  # the sibling ran
    sent = outputs(emu)
    assert sent[good.call_id] == {"output": {"city": "Paris", "sky": "sunny"}}
    assert sent[bad.call_id]["error"]["type"] == "invalid_arguments"
    assert "not valid Unicode" in sent[bad.call_id]["error"]["message"]
    assert creates_after_outputs(emu) == 1
    assert errors(emu) == []


async def test_a_response_the_server_starts_before_the_outputs_are_in_still_gets_the_results() -> (
    None
):
    """User speech ends just as the outputs leave: the server starts a response that began
    before they were in (so it cannot answer them), and the client's response.create meets
    it. Once it is done, exactly one continuation follows and the model speaks the results."""

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids = await conv.tool_call(
            [("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Rome"})]
        )
        conv.realtime.respond_before_next_output()
        await conv.turn_complete()  # the calls run; their first output meets the speech
        await conv.expect_turn()  # the server's own response, for what the user said
        await conv.say("one moment")
        await conv.wait_answers(ids, timeout=30)
        await conv.turn_complete()
        await conv.say("Oslo and Rome: sunny")  # in the response the continuation opens
        await conv.turn_complete()

    async with (
        Emulator(scenario, protocol="openai") as emu,
        open_session(emu, registry()) as session,
    ):
        await session.send_text("weather in Oslo and Rome?")
        events = await collect_until(session, lambda e: e == TextOut("Oslo and Rome: sunny"))
    assert [e.outcome for e in of_type(events, ToolCallSettled)] == ["ok", "ok"]
    assert len(outputs(emu)) == 2
    refused = creates_after_outputs(emu) - 1  # crossed the server's response, if it did
    assert refused in (0, 1)
    assert emu.violations == []  # one continuation: no missing, no extra


async def test_gpt_realtime_2_runs_the_calls_of_one_response_concurrently() -> None:
    """``parallel_tool_calls`` on the wire; three calls of one response overlap in time (each
    handler waits until all three have started: run one after another, none would finish),
    one output each, one response.create."""
    started: list[str] = []
    all_started = anyio.Event()
    tools = livebridge.ToolRegistry()

    @tools.tool(timeout=20)
    async def get_weather(city: str) -> dict[str, str]:
        """Weather for a city."""
        started.append(city)
        if len(started) == 3:
            all_started.set()
        await all_started.wait()
        return {"city": city, "sky": "sunny"}

    async with (
        Emulator(protocol="openai") as emu,
        LiveSession.connect(
            emu.openai_client(), model="gpt-realtime-2", tools=tools, config=TEXT
        ) as session,
    ):
        await session.send_text("Weather in Oslo, Lisbon and Paris?")
        events = await collect_until(
            session, lambda e: isinstance(e, TurnComplete) and e.reason == "completed"
        )
    (update,) = client_events(emu, "session.update")
    assert update["session"]["parallel_tool_calls"] is True
    assert sorted(started) == ["Lisbon", "Oslo", "Paris"]
    assert [e.outcome for e in of_type(events, ToolCallSettled)] == ["ok"] * 3
    done_with_calls = next(
        entry.message["response"]["output"]
        for entry in emu.transcript
        if entry.direction == "server" and entry.message.get("type") == "response.done"
    )
    assert [item["type"] for item in done_with_calls] == ["function_call"] * 3  # one response
    assert len(outputs(emu)) == 3 and creates_after_outputs(emu) == 1
    assert emu.violations == []


async def test_a_dropped_connection_starts_a_fresh_conversation_and_orphans_the_call() -> None:
    gate = anyio.Event()
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def lookup(city: str) -> str:
        """Look a city up."""
        await gate.wait()
        return city

    connections: list[int] = []

    async def scenario(conv: Conversation) -> None:
        connections.append(len(connections) + 1)
        if len(connections) == 1:
            await conv.expect_turn()
            await conv.tool_call([("lookup", {"city": "Quito"})])
            await conv.turn_complete()
            await conv.close(1011, "internal error")
            return
        await conv.expect_turn()
        await conv.say("hello again")
        await conv.turn_complete()

    async with Emulator(scenario, protocol="openai") as emu, open_session(emu, tools) as session:
        await session.send_text("find Quito")
        events = await collect_until(session, lambda e: isinstance(e, Resumed))
        gate.set()  # the handler ends; its answer belongs to a conversation that is gone
        await session.send_text("are you there?")
        events += await collect_until(session, lambda e: e == TextOut("hello again"))
    (resumed,) = of_type(events, Resumed)
    assert resumed.fresh and resumed.reason == "server_error"
    assert isinstance(resumed.error, livebridge.ServerError)
    assert "empty conversation" in str(resumed.error)
    (settled,) = of_type(events, ToolCallSettled)
    assert settled.ending == "orphaned" and list(resumed.orphaned) == [settled.call_id]
    assert "cannot resume" in (settled.reason or "")
    assert outputs(emu) == {}
    updates = client_events(emu, "session.update")  # the new connection is configured again
    assert len(updates) == 2 and updates[0] == updates[1]
    assert errors(emu) == []


async def test_audio_goes_in_at_24_khz_and_other_rates_are_refused() -> None:
    async def scenario(conv: Conversation) -> None:
        await asyncio.Event().wait()  # listens until the client leaves

    async with (
        Emulator(scenario, protocol="openai") as emu,
        open_session(emu, registry()) as session,
    ):
        with pytest.raises(ValueError, match="24000 Hz only"):
            await session.send_audio(b"\x00\x00" * 160, rate=16_000)
        await session.send_audio(b"\x00\x00" * 2400)
        await emu.wait_for(lambda: bool(client_events(emu, "input_audio_buffer.append")))
    assert errors(emu) == []
