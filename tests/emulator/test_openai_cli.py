"""``livebridge emulator --protocol openai`` in a subprocess; a separate ``openai`` program uses
only the printed environment, and the verdict comes out at the end."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from livebridge.cli.main import main

CLI = [sys.executable, "-m", "livebridge.cli.main"]
ENV_KEYS = {"OPENAI_BASE_URL", "OPENAI_API_KEY", "SSL_CERT_FILE"}

#: A plain ``openai`` program: asks for Berlin's weather, answers each call (``EXTRA`` adds
#: more outputs), sends one ``response.create``, prints the model's text.
PROGRAM_TEMPLATE = """
import asyncio, json
import openai

TOOL = {"type": "function", "name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}

async def main():
    async with openai.AsyncOpenAI().realtime.connect(model="gpt-realtime") as conn:
        await conn.session.update(session={"type": "realtime", "output_modalities": ["text"],
                                           "tools": [TOOL]})
        await conn.conversation.item.create(item={"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "weather in Berlin"}]})
        await conn.response.create()
        async for event in conn:
            if event.type == "response.done" and event.response.output[0].type == "function_call":
                for call in event.response.output:
                    for call_id in [call.call_id, *EXTRA]:
                        await conn.conversation.item.create(item={"type": "function_call_output",
                            "call_id": call_id, "output": json.dumps({"output": "cold"})})
                await conn.response.create()
            elif event.type == "response.output_text.done":
                print(event.text)
            elif event.type == "response.done":
                break

asyncio.run(main())
"""


async def environment_lines(server: asyncio.subprocess.Process) -> dict[str, str]:
    assert server.stdout is not None
    env: dict[str, str] = {}
    while len(env) < len(ENV_KEYS):
        line = (await asyncio.wait_for(server.stdout.readline(), 60)).decode().strip()
        name, _, value = line.partition("=")
        assert name in ENV_KEYS, line
        env[name] = value
    return env


async def run_program(server: asyncio.subprocess.Process, extra: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(await environment_lines(server))
    program = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        PROGRAM_TEMPLATE.replace("EXTRA", extra),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(program.communicate(), 60)
    assert program.returncode is not None
    return program.returncode, out.decode(), err.decode()


async def test_printed_environment_points_an_openai_program_at_the_emulator(
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "scenario.json"
    steps = [
        {"expect_turn": {}},
        {"tool_call": [["get_weather", {"city": "Berlin"}]]},
        {"wait_answers": {}},
        {"say": "Berlin is cold."},
        {"turn_complete": {}},
    ]
    scenario.write_text(json.dumps(steps))
    server = await asyncio.create_subprocess_exec(
        *CLI,
        "emulator",
        "--protocol",
        "openai",
        "--strict",
        "--scenario",
        str(scenario),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        code, out, err = await run_program(server, "[]")
        assert code == 0, err
        assert out.strip() == "Berlin is cold."
    finally:
        server.send_signal(signal.SIGTERM)
        summary, _ = await asyncio.wait_for(server.communicate(), 30)
    assert server.returncode == 0
    assert summary.decode().splitlines()[-1] == "PASS: no violations"


async def test_a_duplicate_output_is_reported_live_and_fails_strict(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    server = await asyncio.create_subprocess_exec(
        *CLI,
        "emulator",
        "--protocol",
        "openai",
        "--strict",
        "--report",
        str(report),
        "--held-answers",
        "30",
        stdout=asyncio.subprocess.PIPE,
    )
    assert server.stdout is not None
    try:
        code, _, err = await run_program(server, "[call.call_id]")
        assert code == 0, err
        live = (await asyncio.wait_for(server.stdout.readline(), 60)).decode()
        assert live.startswith("violation error: duplicate_answer [s1] second output for call")
    finally:
        server.send_signal(signal.SIGINT)
        out, _ = await asyncio.wait_for(server.communicate(), 30)
    assert server.returncode == 1
    lines = out.decode().splitlines()
    assert lines[0] == "summary: 1 connection(s), 1 violation(s) (1 error(s), 0 warning(s))"
    written = json.loads(report.read_text())
    assert [v["kind"] for v in written["violations"]] == ["duplicate_answer"]
    assert written["sessions"][0]["model"] == "gpt-realtime"
    created = [
        entry["message"]["response"]
        for entry in written["transcript"]
        if entry["message"].get("type") == "response.created"
    ]
    assert len(created) == 2  # as sent: not as the responses ended later
    assert all(r["status"] == "in_progress" and r["output"] == [] for r in created)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--protocol", "openai", "--reissue-after", "1"],
            "--reissue-after: Gemini Live only, not --protocol openai",
        ),
        (
            ["--protocol", "openai", "--no-audio-check", "--held-answers", "off"],
            "--no-audio-check: Gemini Live only, not --protocol openai",
        ),
        (["--auto-response"], "--auto-response: OpenAI Realtime only; add --protocol openai"),
    ],
)
def test_flags_of_the_other_protocol_are_one_line_errors(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["emulator", *flags]) == 2
    assert capsys.readouterr().err == f"livebridge emulator: {message}\n"


def test_a_gemini_only_step_is_refused_when_loaded_for_openai(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "steps.json"
    scenario.write_text(json.dumps([{"expect_turn": {}}, {"go_away": "1s"}]))
    assert main(["emulator", "--protocol", "openai", "--scenario", str(scenario)]) == 2
    err = capsys.readouterr().err
    assert "step 1: 'go_away' is not a step of the openai protocol" in err
    assert err.count("\n") == 1
