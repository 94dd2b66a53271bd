"""How soon the model answers the user, and what each turn and session spends in tokens: the
numbers an operator graphs first, measured through real sessions on both vendors."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from prometheus_client import CollectorRegistry

from livebridge import LiveSession, ToolRegistry
from livebridge.calls.observers import Recorder, TurnMeasured
from livebridge.emulator import Emulator
from livebridge.observe.metrics import PrometheusObserver
from tests.support.gemini_sessions import MODEL, TEXT_CONFIG


def tools() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    async def get_weather(city: str) -> dict[str, Any]:
        """Weather in a city."""
        return {"city": city, "sky": "sunny"}

    return registry


def connect(emu: Emulator, vendor: str, observers: list[Any]) -> Any:
    if vendor == "gemini":
        return LiveSession.connect(
            emu.client(), model=MODEL, tools=tools(), config=TEXT_CONFIG, observers=observers
        )
    return LiveSession.connect(
        emu.openai_client(),
        model="gpt-realtime-2",
        tools=tools(),
        config={"output_modalities": ["text"]},
        observers=observers,
    )


@pytest.mark.parametrize("vendor", ["gemini", "openai"])
async def test_each_turn_reports_its_wait_and_tokens(vendor: Literal["gemini", "openai"]) -> None:
    registry = CollectorRegistry()
    recorder = Recorder()
    metrics = PrometheusObserver(registry, functions=["get_weather"])
    async with (
        Emulator(protocol=vendor) as emu,
        connect(emu, vendor, [metrics, recorder]) as session,
    ):
        await session.send_text("Weather in Paris?")
        [event async for event in session.exchange()]
        await session.send_text("And in Oslo?")
        [event async for event in session.exchange()]
    turns = recorder.of(TurnMeasured)
    answered = [t for t in turns if t.first_output is not None]
    # Each question's answer is timed once: the reply to a tool answer is not a user's wait.
    assert len(answered) == 2, turns
    assert all(0 < t.first_output < 30 for t in answered)
    assert all(t.output_tokens is not None for t in turns)
    sample = registry.get_sample_value
    assert sample("livebridge_turn_first_output_seconds_count") == 2
    spent = sum(t.output_tokens or 0 for t in turns)
    assert sample("livebridge_turn_tokens_sum", {"direction": "output"}) == spent
    # The session's total is observed once, when it closes.
    assert sample("livebridge_session_tokens_count", {"direction": "output"}) == 1
    assert sample("livebridge_session_tokens_sum", {"direction": "output"}) == spent


async def test_a_gpt_live_turn_reports_its_wait_and_tokens_and_counts_nested_events() -> None:
    """GPT-Live: the backend's answer to typed text is timed from the text to its first output,
    with the backend's tokens; each nested ``response.*`` event is counted under its own type
    as well as in its ``response.event`` envelope."""
    from livebridge.emulator import LiveServerSession

    async def scenario(live: LiveServerSession) -> None:
        live.next_calls = [[("get_weather", {"city": "Paris"})], [], [("get_weather", {})], []]

    registry = CollectorRegistry()
    recorder = Recorder()
    metrics = PrometheusObserver(registry, functions=["get_weather"])
    async with (
        Emulator(scenario, model="gpt-live-1.1") as emu,
        LiveSession.connect(
            emu.client(), model="gpt-live-1.1", tools=tools(), observers=[metrics, recorder]
        ) as session,
    ):
        for question in ("Weather in Paris?", "And in Oslo?"):
            await session.send_text(question)
            [event async for event in session.exchange()]
    turns = recorder.of(TurnMeasured)
    answered = [t for t in turns if t.first_output is not None]
    assert len(answered) == 2, turns
    assert all(0 < t.first_output < 30 for t in answered)
    assert [(t.input_tokens, t.output_tokens) for t in answered] == [(40, 12), (40, 12)]
    sample = registry.get_sample_value
    assert sample("livebridge_turn_first_output_seconds_count") == 2
    served = [e.message for e in emu.transcript if e.direction == "server"]
    envelopes = [m["event"]["type"] for m in served if m.get("type") == "response.event"]
    for kind in ("response.event", "response.output_item.done", "response.completed"):
        count = len(envelopes) if kind == "response.event" else envelopes.count(kind)
        seen = sample("livebridge_messages_total", {"direction": "received", "type": kind})
        assert count > 0 and seen == count, kind
