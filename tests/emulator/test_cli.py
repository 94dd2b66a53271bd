"""``livebridge emulator`` in a subprocess; a separate program uses only the printed environment."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from livebridge.cli.emulator import parse_faults
from livebridge.cli.main import main

CLI = [sys.executable, "-m", "livebridge.cli.main"]

#: A plain google-genai program: asks for Berlin's weather and answers with ``ANSWERS``.
PROGRAM_TEMPLATE = """
import asyncio
from google import genai
from google.genai import types

async def main():
    declaration = types.FunctionDeclaration(name="get_weather", parameters_json_schema={
        "type": "object", "properties": {"city": {"type": "string"}}})
    config = types.LiveConnectConfig(response_modalities=["TEXT"],
        tools=[types.Tool(function_declarations=[declaration])])
    async with genai.Client().aio.live.connect(model="gemini-live", config=config) as session:
        await session.send_realtime_input(text="weather in Berlin")
        async for message in session.receive():
            if message.tool_call:
                answers = [types.FunctionResponse(id=c.id, name=c.name, response={"output": "cold"})
                           for c in message.tool_call.function_calls]
                await session.send_tool_response(function_responses=ANSWERS)
            if message.text:
                print(message.text)

asyncio.run(main())
"""
PROGRAM = PROGRAM_TEMPLATE.replace("ANSWERS", "answers")


async def test_printed_environment_points_a_program_at_the_emulator(tmp_path: Path) -> None:
    scenario = tmp_path / "scenario.json"
    scenario.write_text(
        json.dumps(
            [
                {"expect_turn": {}},
                {"tool_call": [["get_weather", {"city": "Berlin"}]]},
                {"wait_answers": {}},
                {"say": "Berlin is cold."},
                {"turn_complete": {}},
                {"model": {}},
            ]
        )
    )
    server = await asyncio.create_subprocess_exec(
        *CLI,
        "emulator",
        "--scenario",
        str(scenario),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert server.stdout is not None
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GEMINI_"))}
        env.update(await environment_lines(server))
        program = await asyncio.create_subprocess_exec(
            sys.executable, "-c", PROGRAM, env=env, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await asyncio.wait_for(program.communicate(), 60)
        assert program.returncode == 0
        assert out.decode().strip() == "Berlin is cold."
    finally:
        server.terminate()
        assert await asyncio.wait_for(server.wait(), 30) == 0


async def environment_lines(server: asyncio.subprocess.Process) -> dict[str, str]:
    """The ``KEY=VALUE`` lines the emulator prints first."""
    assert server.stdout is not None
    env: dict[str, str] = {}
    while len(env) < len(ENV_KEYS):
        line = (await asyncio.wait_for(server.stdout.readline(), 60)).decode().strip()
        name, _, value = line.partition("=")
        assert name in ENV_KEYS, line
        env[name] = value
    return env


#: Exactly what it prints: one key variable (google-genai warns when it sees two).
ENV_KEYS = {"GOOGLE_GEMINI_BASE_URL", "SSL_CERT_FILE", "GEMINI_API_KEY"}

#: The same program, answering a call the server never issued besides the real ones.
BOGUS_ID_PROGRAM = PROGRAM_TEMPLATE.replace(
    "ANSWERS",
    '[types.FunctionResponse(id="function-call-0", name="get_weather", '
    'response={"output": "cold"}), *answers]',
)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_a_bogus_id_is_reported_live_in_the_summary_and_in_the_report(
    tmp_path: Path, signum: int
) -> None:
    report = tmp_path / "report.json"
    server = await asyncio.create_subprocess_exec(
        *CLI, "emulator", "--strict", "--report", str(report), stdout=asyncio.subprocess.PIPE
    )
    assert server.stdout is not None
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GEMINI_"))}
        env.update(await environment_lines(server))
        program = await asyncio.create_subprocess_exec(
            sys.executable, "-c", BOGUS_ID_PROGRAM, env=env, stderr=asyncio.subprocess.PIPE
        )
        _, err = await asyncio.wait_for(program.communicate(), 60)
        assert program.returncode == 0, err.decode()
        live = (await asyncio.wait_for(server.stdout.readline(), 60)).decode()
        assert live.startswith("violation error: unknown_id [s1] answer for unknown call id")
    finally:
        server.send_signal(signum)
        out, _ = await asyncio.wait_for(server.communicate(), 30)
    assert server.returncode == 1  # --strict, and there was a violation
    summary = out.decode().splitlines()
    assert summary[0] == "summary: 1 connection(s), 1 violation(s) (1 error(s), 0 warning(s))"
    assert summary[1].split() == ["error", "unknown_id", "1"]
    assert summary[-1] == "FAIL: the client broke the contract"
    written = json.loads(report.read_text())
    assert [(v["kind"], v["session"]) for v in written["violations"]] == [("unknown_id", "s1")]
    offending = written["violations"][0]["offending"]["toolResponse"]["functionResponses"][0]
    assert offending["id"] == "function-call-0"
    directions = {entry["direction"] for entry in written["transcript"]}
    assert directions == {"client", "server"}
    assert written["sessions"][0]["model"] == "gemini-live"


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield int(taken.getsockname()[1])


def bad_inputs(tmp_path: Path, busy: int) -> list[tuple[list[str], str]]:
    (tmp_path / "dict.json").write_text('{"say": "hi"}')
    (tmp_path / "step.json").write_text('[{"expect_turn": {}}, {"tool_call": "get_weather"}]')
    (tmp_path / "broken.json").write_text("[{")
    return [
        (["--port", "99999"], "--port needs a number from 0 to 65535, got 99999"),
        (["--port", "http"], "--port needs a number from 0 to 65535, got 'http'"),
        (["--port", str(busy)], f"cannot listen on 127.0.0.1:{busy}: "),
        (["--scenario", str(tmp_path / "missing.json")], "cannot read scenario"),
        (["--scenario", str(tmp_path / "dict.json")], "expected a JSON list of steps, got dict"),
        (["--scenario", str(tmp_path / "step.json")], "step.json: step 1 (tool_call): Expected"),
        (["--scenario", str(tmp_path / "broken.json")], "broken.json is not JSON"),
        (["--faults", "delay=soon"], "--faults delay needs a number of seconds, got 'soon'"),
        (["--faults", "explode"], "--faults: cannot use 'explode'"),
        (["--held-answers", "-1"], "--held-answers needs a number of seconds ≥ 0"),
        (["--reissue-after", "x"], "--reissue-after needs a number of seconds, got 'x'"),
        (["--models", ","], "--models needs at least one model name"),
        (["--report", str(tmp_path / "no" / "r.json")], "--report: the folder"),
    ]


def test_every_bad_input_is_one_line_and_a_non_zero_exit(
    tmp_path: Path, busy_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    for flags, message in bad_inputs(tmp_path, busy_port):
        assert main(["emulator", *flags]) == 2, flags
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err.startswith("livebridge emulator: "), captured.err
        assert message in captured.err
        assert captured.err.count("\n") == 1, captured.err


def test_a_bad_input_in_a_real_process_has_no_traceback(busy_port: int) -> None:
    result = subprocess.run(
        [*CLI, "emulator", "--port", str(busy_port)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"livebridge emulator: cannot listen on 127.0.0.1:{busy_port}")
    assert len(result.stderr.splitlines()) == 1


def test_faults_flag() -> None:
    faults = parse_faults("delay=0.1, read_delay=0.05,drop=toolCall,abort_after_tool_call")
    assert (faults.delay, faults.read_delay, faults.abort_after_tool_call) == (0.1, 0.05, True)
    assert faults.drop is not None and faults.drop({"toolCall": {}})
    assert not faults.drop({"serverContent": {}})
