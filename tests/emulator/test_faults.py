"""Fault injection: delayed and dropped frames, an abrupt close mid-call, a slow reader."""

from __future__ import annotations

import time

import pytest
from google.genai import errors, types

from livebridge.emulator import Emulator, Faults
from tests.support.gemini_clients import (
    MODEL,
    answer,
    next_message,
    tool_call,
    until_turn_complete,
    weather_config,
)


async def test_delayed_frames_keep_their_order() -> None:
    async with Emulator(faults=Faults(delay=0.05)) as emu:
        config = types.LiveConnectConfig(response_modalities=[types.Modality.TEXT])
        async with emu.client().aio.live.connect(model=MODEL, config=config) as session:
            start = time.monotonic()
            await session.send_realtime_input(text="hi")
            messages = await until_turn_complete(session)
            elapsed = time.monotonic() - start
    assert [m.text for m in messages if m.text] == ["You said: hi"]
    assert elapsed >= 0.15  # text, generationComplete, turnComplete: 3 frames, 50 ms each


async def test_dropped_tool_call_never_reaches_the_client() -> None:
    faults = Faults(drop=lambda message: "toolCall" in message)
    async with (
        Emulator(faults=faults, reissue_after=0.3) as emu,
        emu.client().aio.live.connect(model=MODEL, config=weather_config()) as session,
    ):
        await session.send_realtime_input(text="weather in Paris")
        await emu.wait_for(lambda: sum(bool(e.message.get("dropped")) for e in emu.transcript) >= 2)
    dropped = [e.message for e in emu.transcript if e.message.get("dropped")]
    assert all("toolCall" in m for m in dropped)
    assert [v.severity for v in emu.violations if v.kind == "unanswered"]


async def test_abrupt_close_mid_call() -> None:
    async with (
        Emulator(faults=Faults(abort_after_tool_call=True)) as emu,
        emu.client().aio.live.connect(model=MODEL, config=weather_config()) as session,
    ):
        await session.send_realtime_input(text="weather in Paris")
        await tool_call(session)
        with pytest.raises(errors.APIError) as closed:
            await next_message(session)
    assert closed.value.code == 1006
    await emu.wait_for(lambda: bool(emu.violations))
    assert [(v.kind, v.severity) for v in emu.violations] == [("unanswered", "warning")]


async def test_dropped_client_frame_is_recorded_but_ignored() -> None:
    faults = Faults(drop_client=lambda message: "toolResponse" in message)
    async with (
        Emulator(faults=faults) as emu,
        emu.client().aio.live.connect(model=MODEL, config=weather_config()) as session,
    ):
        await session.send_realtime_input(text="weather in Paris")
        call = await tool_call(session)
        await session.send_tool_response(
            function_responses=[answer(c) for c in call.function_calls or []]
        )
        await emu.wait_for(lambda: any("toolResponse" in e.message for e in emu.transcript))
        assert emu.sessions[0].pending_calls


async def test_slow_reader_delays_processing() -> None:
    async with Emulator(faults=Faults(read_delay=0.1)) as emu:
        config = types.LiveConnectConfig(response_modalities=[types.Modality.TEXT])
        async with emu.client().aio.live.connect(model=MODEL, config=config) as session:
            start = time.monotonic()
            for text in ("a", "b", "c"):
                await session.send_realtime_input(text=text)
            for _ in range(3):
                await until_turn_complete(session)
            assert time.monotonic() - start >= 0.3
