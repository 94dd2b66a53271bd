"""JSON scenario files: validated when loaded (errors name the step), played with their timing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from livebridge.emulator import Emulator, load_scenario, scenario_from_steps
from livebridge.emulator.steps import STEP_TYPES
from livebridge.errors import ScenarioError
from tests.support.gemini_clients import (
    MODEL,
    raw_connect,
    recv_json,
    recv_until,
    tool_call,
    weather_config,
)

EXAMPLES = Path(__file__).parents[2] / "examples" / "scenarios"


@pytest.mark.parametrize(
    ("steps", "error"),
    [
        ([{"expect_turn": {}}, {"nope": 1}], "step 1: unknown step 'nope'"),
        (["say"], "step 0: expected a one-key object"),
        ([{"say": "a", "speak": 1}], "step 0: expected a one-key object"),
        ([{"sleep": -1}], "step 0 (sleep): Expected `float` >= 0"),
        ([{"sleep": "1s"}], "step 0 (sleep): Expected `float`, got `str`"),
        ([{"tool_call": [["get_weather"]]}], "step 0 (tool_call)"),
        ([{"tool_call": [{"args": {}}]}], "step 0 (tool_call): Object missing required field"),
        ([{"interrupted": {"cancle": True}}], "step 0 (interrupted): Object contains unknown"),
        ([{"wait_answers": {"timeout": "soon"}}], "step 0 (wait_answers)"),
        ([{"go_away": "soon"}], "step 0 (go_away): not a duration: 'soon'"),
        ([{"close": [1000]}], "step 0 (close)"),
        ({"say": "hi"}, "expected a JSON list of steps, got dict"),
    ],
)
def test_a_malformed_step_is_refused_when_loaded_naming_its_index(steps: Any, error: str) -> None:
    with pytest.raises(ScenarioError) as refused:
        scenario_from_steps(steps)
    assert error in str(refused.value)


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"cannot read scenario .*missing\.json"):
        load_scenario(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text('[{"say": ')
    with pytest.raises(ScenarioError, match=r"broken\.json is not JSON"):
        load_scenario(broken)
    bad = tmp_path / "bad.json"
    bad.write_text('[{"say": "hi"}, {"sleeep": 1}]')
    with pytest.raises(ScenarioError, match=r"bad\.json: step 1: unknown step 'sleeep'"):
        load_scenario(bad)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.json")), ids=lambda p: p.name)
def test_every_example_file_loads(path: Path) -> None:
    load_scenario(path)
    steps = json.loads(path.read_text())
    assert {next(iter(step)) for step in steps} <= set(STEP_TYPES)


async def test_tool_call_cancel_at_one_second_turn_at_two_from_a_file() -> None:
    scenario = load_scenario(EXAMPLES / "cancel_then_turn.json")
    async with (
        Emulator(scenario) as emu,
        emu.client().aio.live.connect(model=MODEL, config=weather_config()) as session,
    ):
        await session.send_realtime_input(text="weather?")
        await tool_call(session)  # and never answered: the scenario cancels it
        texts = [message.text async for message in session.receive() if message.text]
    assert texts == ["Let's leave the weather for now."]

    def first(key: str) -> float:
        return next(e.at for e in emu.transcript if key in e.message or key in str(e.message))

    called = first("toolCall")
    assert 0.9 <= first("toolCallCancellation") - called < 3.0
    assert 1.9 <= first("turnComplete") - called < 5.0
    assert emu.violations == []


async def test_explicit_ids_an_early_turn_end_and_a_raw_frame(tmp_path: Path) -> None:
    steps = [
        {"expect_turn": {}},
        {"tool_call": [{"name": "get_weather", "args": {"city": "Oslo"}, "id": "call-oslo"}]},
        {"wait_answers": {"timeout": 0.2}},
        {"turn_complete": {"wait": False}},
        {"raw": "not json at all"},
        {"wait_answers": {"ids": ["call-oslo"]}},
        {"say": "Got it."},
        {"turn_complete": {}},
    ]
    path = tmp_path / "steps.json"
    path.write_text(json.dumps(steps))
    async with Emulator(load_scenario(path)) as emu, raw_connect(emu) as ws:
        await ws.send(json.dumps({"realtime_input": {"text": "weather in Oslo"}}))
        call = await recv_until(ws, "toolCall")
        assert [c["id"] for c in call["toolCall"]["functionCalls"]] == ["call-oslo"]
        assert (await recv_json(ws))["serverContent"] == {"generationComplete": True}
        assert (await recv_json(ws))["serverContent"] == {"turnComplete": True}
        assert await ws.recv() == b"not json at all"
        response = {"id": "call-oslo", "name": "get_weather", "response": {"output": "cold"}}
        await ws.send(json.dumps({"tool_response": {"function_responses": [response]}}))
        said = await recv_until(ws, "serverContent")  # an AUDIO session: the text is transcribed
        assert said["serverContent"] == {"outputTranscription": {"text": "Got it."}}
    await emu.settled()
    assert emu.violations == []
