"""Where the field says the service differs from the documentation, the emulator does the same."""

from __future__ import annotations

import json

import pytest
from google.genai import types
from websockets.exceptions import ConnectionClosedError

from livebridge.emulator import Conversation, Emulator
from livebridge.emulator.shared import MAX_FRAME_BYTES
from tests.support.gemini_clients import (
    MODEL,
    answer,
    next_message,
    raw_connect,
    recv_until,
    tool_call,
    until_turn_complete,
    weather_config,
)


def kinds(emu: Emulator) -> list[tuple[str, str]]:
    return [(v.kind, v.severity) for v in emu.violations]


async def test_a_frame_over_one_megabyte_is_closed_with_1007(live_emulator: Emulator) -> None:
    async with raw_connect(live_emulator) as ws:
        await ws.send(json.dumps({"realtime_input": {"text": "x" * MAX_FRAME_BYTES}}))
        with pytest.raises(ConnectionClosedError) as closed:
            await ws.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1007
    assert kinds(live_emulator) == [("frame_too_large", "error")]


@pytest.mark.parametrize(
    ("model", "closed"),
    [("gemini-3.1-flash-live-preview", True), ("gemini-live-2.5-flash-preview", False)],
)
async def test_media_chunks_are_refused_by_3x_models(model: str, closed: bool) -> None:
    chunk = {"data": "AAA=", "mime_type": "audio/pcm;rate=16000"}
    async with Emulator() as emu, raw_connect(emu, setup={"model": f"models/{model}"}) as ws:
        await ws.send(json.dumps({"realtime_input": {"mediaChunks": [chunk]}}))
        if closed:
            with pytest.raises(ConnectionClosedError) as error:
                await ws.recv()
            assert error.value.rcvd is not None and error.value.rcvd.code == 1007
            assert "media_chunks is deprecated" in error.value.rcvd.reason
        await emu.wait_for(lambda: bool(emu.violations))
    assert kinds(emu) == [("deprecated_media_chunks", "error" if closed else "warning")]


async def test_barge_in_without_cancellation_drops_the_pending_call_silently() -> None:
    async with (
        Emulator(cancel_on_interrupt=False) as emu,
        emu.client().aio.live.connect(model=MODEL, config=weather_config()) as session,
    ):
        await session.send_realtime_input(text="weather in Oslo")
        call = await tool_call(session)
        await session.send_realtime_input(activity_start=types.ActivityStart())
        messages = await until_turn_complete(session)
    sent = [e.message for e in emu.transcript if e.direction == "server"]
    assert not any("toolCallCancellation" in m for m in sent)
    assert messages[0].server_content and messages[0].server_content.interrupted
    (call_id,) = [c.id for c in call.function_calls or []]
    assert call_id is not None
    assert emu.sessions[0].checker.calls[call_id].state == "withdrawn"
    assert emu.violations == []  # the client could not have known: no fault of its own


async def test_a_call_left_unanswered_is_reissued_on_the_next_turn() -> None:
    async with (
        Emulator(cancel_on_interrupt=False, reissue_next_turn=True) as emu,
        emu.client().aio.live.connect(model=MODEL, config=weather_config()) as session,
    ):
        await session.send_realtime_input(text="weather in Oslo")
        (first,) = (await tool_call(session)).function_calls or []
        await session.send_realtime_input(activity_start=types.ActivityStart())
        await until_turn_complete(session)
        await session.send_realtime_input(text="and in Lisbon?")
        (again,) = (await tool_call(session)).function_calls or []
        await session.send_tool_response(function_responses=[answer(again)])
        (lisbon,) = (await tool_call(session)).function_calls or []
        await session.send_tool_response(function_responses=[answer(lisbon)])
        await until_turn_complete(session)
    assert (again.name, again.args) == (first.name, first.args) == ("get_weather", {"city": "Oslo"})
    assert again.id != first.id
    assert lisbon.args == {"city": "Lisbon"}
    assert emu.violations == []


async def test_scripted_interruption_without_cancellation_or_turn_complete() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.tool_call([("get_weather", {"city": "Rome"})])
        await conv.interrupted(cancel=False, turn_complete=False)
        await conv.expect_turn()
        await conv.say("Next question.")
        await conv.turn_complete()

    async with (
        Emulator(scenario) as emu,
        emu.client().aio.live.connect(model=MODEL, config=weather_config()) as session,
    ):
        await session.send_realtime_input(text="weather in Rome")
        await tool_call(session)
        interrupted = await next_message(session)
        assert interrupted.server_content and interrupted.server_content.interrupted
        await session.send_realtime_input(text="never mind")
        messages = await until_turn_complete(session)
    assert [m.text for m in messages if m.text] == ["Next question."]
    server = [e.message for e in emu.transcript if e.direction == "server"]
    after_call = server[[("toolCall" in m) for m in server].index(True) + 1 :]
    turn_ends = [m for m in after_call if m.get("serverContent", {}).get("turnComplete")]
    assert len(turn_ends) == 1  # only the second turn's
    assert not any("toolCallCancellation" in m for m in server)
    assert emu.violations == []


async def test_scheduling_on_a_blocking_answer_is_ignored() -> None:
    async with (
        Emulator() as emu,
        emu.client().aio.live.connect(model=MODEL, config=weather_config()) as session,
    ):
        await session.send_realtime_input(text="weather in Lima")
        call = await tool_call(session)
        interrupt = types.FunctionResponseScheduling.INTERRUPT
        await session.send_tool_response(
            function_responses=[answer(c, scheduling=interrupt) for c in call.function_calls or []]
        )
        messages = await until_turn_complete(session)
    assert not any(m.server_content and m.server_content.interrupted for m in messages)
    assert [m.text for m in messages if m.text] == ["Lima: sunny in Lima."]
    assert emu.sessions[0].reports == []
    assert kinds(emu) == [("scheduling_on_blocking", "warning")]


async def test_a_failing_scenario_is_the_services_internal_error() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.tool_call([("get_weather", {"city": "Oslo"})])
        raise RuntimeError("the script is wrong")

    async with Emulator(scenario) as emu, raw_connect(emu) as ws:
        await ws.send(json.dumps({"realtime_input": {"text": "weather?"}}))
        await recv_until(ws, "toolCall")
        with pytest.raises(ConnectionClosedError) as closed:
            await recv_until(ws, "never")
        assert closed.value.rcvd is not None
        assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (
            1011,
            "Internal error occurred.",
        )
        await emu.settled()
    assert emu.sessions[0].errors == ["RuntimeError: the script is wrong"]
    assert kinds(emu) == [("unanswered", "warning")]  # the server closed: not the client's fault
