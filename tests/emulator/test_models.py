"""The emulator behaves as each model's profile says: Vertex paths, answers by name, refusals."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from typing import Any

import pytest
from google.genai import types
from websockets.exceptions import ConnectionClosed

from livebridge.emulator import Emulator
from livebridge.emulator.contract import Violation
from livebridge.emulator.gemini.checker import Checker
from livebridge.vendors.gemini import wire
from tests.support.gemini_clients import (
    answer,
    pcm,
    raw_connect,
    recv_until,
    tool_call,
    until_turn_complete,
    weather_config,
)

VERTEX_PATH = "/ws/google.cloud.aiplatform.v1beta1.LlmBidiService/BidiGenerateContent"
DECLARED = {
    "model": "publishers/google/models/gemini-3.8-live",
    "generationConfig": {"responseModalities": ["TEXT"]},
    "tools": [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "behavior": "NON_BLOCKING",
                    "parametersJsonSchema": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                    },
                }
            ]
        }
    ],
}


def responses(*answers: dict[str, Any]) -> list[wire.FunctionResponse]:
    return [wire.FunctionResponse(**answer) for answer in answers]


def test_the_checker_matches_answers_without_ids_by_name_and_order() -> None:
    found: list[Violation] = []
    checker = Checker("s1", found.append, call_ids=False)
    keys = [checker.nameless_key() for _ in range(3)]
    checker.issue(
        [
            (keys[0], "get_weather", {"city": "Oslo"}, True),
            (keys[1], "get_time", {}, True),
            (keys[2], "get_weather", {"city": "Lisbon"}, True),
        ],
        nameless=True,
    )
    accepted = checker.on_tool_response(
        {},
        responses(
            {"name": "get_weather", "response": {"output": "first"}},
            {"name": "get_weather", "response": {"output": "second"}},
            {"name": "get_time", "response": {"output": "noon"}},
        ),
    )
    assert [(record.id, answer.response) for record, answer in accepted] == [
        (keys[0], {"output": "first"}),
        (keys[2], {"output": "second"}),
        (keys[1], {"output": "noon"}),
    ]
    assert found == []
    checker.on_tool_response({}, responses({"name": "get_weather", "response": {"output": 3}}))
    assert [(v.kind, v.severity) for v in found] == [("unknown_id", "error")]
    # Where the service sends ids, an answer without one is the client's error.
    with_ids = Checker("s2", found.append)
    with_ids.on_tool_response({}, responses({"name": "get_weather", "response": {}}))
    assert found[-1].kind == "missing_id"


async def test_vertex_sends_calls_without_ids_and_refuses_will_continue() -> None:
    async def scenario(conv: Any) -> None:
        await conv.expect_turn()
        await conv.tool_call([("get_weather", {"city": "Oslo"})])
        await asyncio.Event().wait()

    setup = {**DECLARED, "model": "publishers/google/models/gemini-2.5-flash-native-audio"}
    async with Emulator(scenario) as emu, raw_connect(emu, path=VERTEX_PATH, setup=setup) as ws:
        await ws.send(json.dumps({"realtimeInput": {"text": "go"}}))
        call = await recv_until(ws, "toolCall")
        (issued,) = call["toolCall"]["functionCalls"]
        assert "id" not in issued and issued["name"] == "get_weather"
        answer = {"name": "get_weather", "response": {"output": 1}, "willContinue": True}
        await ws.send(json.dumps({"toolResponse": {"functionResponses": [answer]}}))
        with pytest.raises(ConnectionClosed) as closed:
            await recv_until(ws, "never")
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1007
    assert 'Unknown name "will_continue"' in closed.value.rcvd.reason
    (connection,) = emu.sessions
    assert (connection.backend, connection.profile.family) == (
        "vertex",
        "gemini-2.5-flash-native-audio",
    )
    assert [v.kind for v in emu.violations if v.severity == "error"] == ["unsupported_field"]


async def test_vertex_on_2x_refuses_scheduling_as_it_did_in_2025() -> None:
    async def scenario(conv: Any) -> None:
        await conv.expect_turn()
        await conv.tool_call([("get_weather", {"city": "Oslo"})])
        await asyncio.Event().wait()

    setup = {**DECLARED, "model": "publishers/google/models/gemini-live-2.5-flash-preview"}
    async with Emulator(scenario) as emu, raw_connect(emu, path=VERTEX_PATH, setup=setup) as ws:
        await ws.send(json.dumps({"realtimeInput": {"text": "go"}}))
        await recv_until(ws, "toolCall")
        answer = {"name": "get_weather", "response": {"output": 1}, "scheduling": "SILENT"}
        await ws.send(json.dumps({"toolResponse": {"functionResponses": [answer]}}))
        with pytest.raises(ConnectionClosed) as closed:
            await recv_until(ws, "never")
    assert closed.value.rcvd is not None and 'Unknown name "scheduling"' in closed.value.rcvd.reason


def test_the_command_behaves_as_a_model_or_says_it_knows_none() -> None:
    command = [sys.executable, "-m", "livebridge", "emulator", "--port", "0"]
    bad = subprocess.run(
        [*command, "--model", "gemini-9-live"], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2
    (line,) = bad.stderr.splitlines()
    assert "--model 'gemini-9-live' is not a model livebridge knows" in line
    assert "gemini-3.8-live" in line
    with subprocess.Popen(
        [*command, "--model", "gemini-3.8-live"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    ) as served:
        assert served.stdout is not None
        first = served.stdout.readline()
        assert first.startswith("GOOGLE_GEMINI_BASE_URL=https://127.0.0.1:")
        served.send_signal(signal.SIGINT)
        rest = served.stdout.read()
    assert served.returncode == 0 and "PASS: no violations" in rest


@pytest.mark.parametrize(
    ("model", "waits"), [("gemini-3.8-live", True), ("gemini-2.5-flash", False)]
)
async def test_an_interrupt_answer_waits_for_the_user_to_finish_on_38(
    model: str, waits: bool
) -> None:
    """On 3.8 an INTERRUPT answer waits until the user stops speaking; on 2.5 it talks over."""
    config = weather_config(types.Behavior.NON_BLOCKING)
    async with (
        Emulator() as emu,
        emu.client().aio.live.connect(model=model, config=config) as session,
    ):
        await session.send_realtime_input(text="Weather in Oslo?")
        (call,) = (await tool_call(session)).function_calls or []
        await until_turn_complete(session)
        (connection,) = emu.sessions
        blob = types.Blob(data=pcm(0.2, loud=True), mime_type="audio/pcm;rate=16000")
        await session.send_realtime_input(audio=blob)  # the user starts talking
        await emu.wait_for(lambda: connection.voice.speaking)
        scheduling = types.FunctionResponseScheduling.INTERRUPT
        await session.send_tool_response(function_responses=[answer(call, scheduling=scheduling)])
        await emu.wait_for(lambda: not connection.checker.calls[call.id or ""].open)
        await session.send_realtime_input(audio=blob)  # still talking
        if waits:
            await emu.wait_for(lambda: connection.voice.speech >= 0.4)
            assert connection.reports == []  # held while the user speaks
        else:
            await emu.wait_for(lambda: bool(connection.reports))
        silence = types.Blob(data=pcm(0.6, loud=False), mime_type="audio/pcm;rate=16000")
        await session.send_realtime_input(audio=silence)  # the user has finished
        await emu.wait_for(lambda: bool(connection.reports))
    assert [r.scheduling for r in connection.reports] == ["INTERRUPT"]
