"""The emulator blames no correct client: what the frameworks users run do, on each model.

Each test drives the google-genai client (or a raw socket) the way a framework does, on the
model whose behaviour that framework relies on, and expects no violation (or exactly the fault
the client makes).
"""

from __future__ import annotations

import asyncio

from google.genai import live, types

from livebridge.emulator import Emulator
from tests.emulator.helpers import answer, next_message, weather_config

NATIVE_AUDIO = "gemini-2.5-flash-native-audio-preview-09-2025"


async def calls_until_turn_complete(session: live.AsyncSession) -> list[types.FunctionCall]:
    """ADK's pattern on native audio: buffer the turn's calls until ``turnComplete``."""
    calls: list[types.FunctionCall] = []
    while True:
        message = await next_message(session)
        if message.tool_call is not None:
            calls.extend(message.tool_call.function_calls or [])
        if message.server_content is not None and message.server_content.turn_complete:
            return calls


async def test_native_audio_25_ends_its_turn_right_after_a_blocking_call() -> None:
    """ADK runs a 2.5 model's tools only once ``turnComplete`` came: it gets it, at once."""
    config = weather_config(types.Behavior.BLOCKING)
    async with (
        Emulator() as emu,
        emu.client().aio.live.connect(model=NATIVE_AUDIO, config=config) as session,
    ):
        await session.send_client_content(
            turns=types.Content(role="user", parts=[types.Part(text="Weather in Paris and Oslo?")]),
            turn_complete=True,
        )
        calls = await asyncio.wait_for(calls_until_turn_complete(session), 5)
        assert [call.args for call in calls] == [{"city": "Paris"}, {"city": "Oslo"}]
        await session.send_tool_response(function_responses=[answer(call) for call in calls])
        spoken = [m.text async for m in session.receive() if m.text]
        assert "sunny in Oslo" in "".join(spoken)
    assert emu.violations == []
