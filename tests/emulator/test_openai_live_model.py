"""The default model of ``Emulator(model="gpt-live-1.1")``: with no scenario, a user's words
naming places become parallel backend calls, through the unmodified openai SDK over TLS."""

from __future__ import annotations

import livebridge
from livebridge.emulator import Emulator
from livebridge.protocol.events import TextOut, ToolCallSettled, ToolCallStarted
from tests.support.gemini_sessions import of_type
from tests.support.gpt_live_sessions import MODEL, open_live, outputs, sent, server_errors


def weather() -> livebridge.ToolRegistry:
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def get_weather(city: str) -> dict[str, str]:
        """The weather in a city."""
        return {"city": city, "sky": "sunny"}

    return tools


async def test_typed_places_become_parallel_calls_without_a_scenario() -> None:
    async with Emulator(model=MODEL) as emu, open_live(emu, weather()) as session:
        await session.send_text("Weather in Oslo and in Lisbon?")
        events = [event async for event in session.exchange()]
        await session.send_text("Thanks!")
        after = [event async for event in session.exchange()]
    started = of_type(events, ToolCallStarted)
    assert sorted(e.args["city"] for e in started) == ["Lisbon", "Oslo"]
    assert {e.outcome for e in of_type(events, ToolCallSettled)} == {"ok"}
    assert set(outputs(emu)) == {e.call_id for e in started}
    assert of_type(events, TextOut) and not of_type(after, ToolCallStarted)
    assert len(sent(emu, "response.create")) == 3  # the question, its outputs, the thanks
    assert server_errors(emu) == []
    assert emu.live is not None and emu.live.sessions[0].verdicts == []
