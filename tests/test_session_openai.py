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
from livebridge import LiveSession, ToolError
from livebridge.emulator import Conversation, Emulator
from livebridge.events import (
    ErrorReported,
    Interrupted,
    Resumed,
    TextOut,
    ToolCallSettled,
    ToolCallStarted,
    TurnComplete,
)
from livebridge.metrics import PrometheusObserver
from livebridge.observe import MessageSeen, Recorder
from tests.session_helpers import collect_until, errors, of_type

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
    assert {name: e.outcome for name, e in settled.items()} == {
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
    assert [e.outcome for e in cancelled] == ["cancelled", "cancelled"]
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
    assert outputs(emu)[settled.call_id]["error"]["type"] == "invalid_arguments"
    assert errors(emu) == []


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
    assert settled.outcome == "orphaned" and list(resumed.orphaned) == [settled.call_id]
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
