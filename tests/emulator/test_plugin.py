"""The ``live_emulator`` fixture, as a user's test file sees it: strict and auto mode, no race."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.timing import seconds

RUNS = 8

USER_TESTS = f"""
import pytest
from google.genai import types

MODEL = "gemini-live-2.5-flash-preview"
WEATHER = types.FunctionDeclaration(
    name="get_weather",
    parameters_json_schema={{"type": "object", "properties": {{"city": {{"type": "string"}}}}}},
)
CONFIG = types.LiveConnectConfig(
    response_modalities=["TEXT"], tools=[types.Tool(function_declarations=[WEATHER])]
)


async def first_tool_call(session):
    async for message in session.receive():
        if message.tool_call:
            return message.tool_call


@pytest.mark.asyncio
@pytest.mark.parametrize("run", range({RUNS}))
async def test_a_call_left_unanswered_is_reported_at_once(live_emulator, run):
    async with live_emulator.client().aio.live.connect(model=MODEL, config=CONFIG) as session:
        await session.send_realtime_input(text="weather in Cairo")
        await first_tool_call(session)
    assert [v.kind for v in live_emulator.violations] == ["unanswered"]


@pytest.mark.asyncio
@pytest.mark.parametrize("run", range({RUNS}))
async def test_an_answered_call_is_clean(live_emulator, run):
    async with live_emulator.client().aio.live.connect(model=MODEL, config=CONFIG) as session:
        await session.send_realtime_input(text="weather in Cairo")
        call = await first_tool_call(session)
        await session.send_tool_response(function_responses=[
            types.FunctionResponse(id=c.id, name=c.name, response={{"output": "hot"}})
            for c in call.function_calls
        ])
        [message async for message in session.receive()]
    assert live_emulator.violations == []


@pytest.mark.asyncio
async def test_settled_waits_for_every_connection(live_emulator):
    async with live_emulator.client().aio.live.connect(model=MODEL, config=CONFIG) as session:
        await session.send_realtime_input(text="weather in Cairo")
        await first_tool_call(session)
    await live_emulator.settled()
    assert all(s.finished for s in live_emulator.sessions)
    assert [v.severity for v in live_emulator.violations] == ["error"]
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["strict", "auto"])
def test_live_emulator_in_each_asyncio_mode(tmp_path: Path, mode: str) -> None:
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    (tmp_path / "pytest.ini").write_text(
        f"[pytest]\nasyncio_mode = {mode}\nasyncio_default_fixture_loop_scope = function\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=seconds(300),
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{2 * RUNS + 1} passed" in result.stdout
