"""``livebridge emulator`` in a subprocess for each vendor; a separate program uses only the
printed environment, and the verdict comes out at the end."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from livebridge.cli.emulator import parse_faults
from livebridge.cli.main import main
from tests.support.gemini_clients import GEMINI_ENV_KEYS, environment_lines
from tests.support.timing import seconds

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
#: The same program, answering a call the server never issued besides the real ones.
BOGUS_ID_PROGRAM = PROGRAM_TEMPLATE.replace(
    "ANSWERS",
    '[types.FunctionResponse(id="function-call-0", name="get_weather", '
    'response={"output": "cold"}), *answers]',
)


#: A plain ``openai`` program: asks for Berlin's weather, answers each call (``EXTRA`` adds
#: more outputs), sends one ``response.create``, prints the model's text.
OPENAI_PROGRAM_TEMPLATE = """
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


def _gemini_report(summary: list[str], written: dict[str, Any]) -> None:
    assert summary[1].split() == ["error", "unknown_id", "1"]
    assert summary[-1] == "FAIL: the client broke the contract"
    offending = written["violations"][0]["offending"]["toolResponse"]["functionResponses"][0]
    assert offending["id"] == "function-call-0"
    directions = {entry["direction"] for entry in written["transcript"]}
    assert directions == {"client", "server"}


def _openai_report(summary: list[str], written: dict[str, Any]) -> None:
    created = [
        entry["message"]["response"]
        for entry in written["transcript"]
        if entry["message"].get("type") == "response.created"
    ]
    assert len(created) == 2  # as sent: not as the responses ended later
    assert all(r["status"] == "in_progress" and r["output"] == [] for r in created)


@dataclass(frozen=True, slots=True)
class Vendor:
    """What differs between ``livebridge emulator`` for one vendor and for the other."""

    name: str
    flags: tuple[str, ...]  # what picks the vendor on the command line
    #: Exactly what the emulator prints.
    env_keys: frozenset[str]
    sdk_prefixes: tuple[str, ...]  # the SDK's own variables, dropped from the program's env
    program: str  # answers every call it is asked
    scenario_end: tuple[dict[str, Any], ...]  # steps after the model's reply
    bad_program: str  # answers one call too many
    bad_flags: tuple[str, ...]
    violation: str  # the kind of violation the bad program commits
    live_line: str  # how the emulator reports it at once
    signals: tuple[int, ...]  # what stops the emulator after it
    model: str
    check_report: Callable[[list[str], dict[str, Any]], None]  # what else the report says


VENDORS = [
    Vendor(
        name="gemini",
        flags=(),
        env_keys=GEMINI_ENV_KEYS,
        sdk_prefixes=("GOOGLE_", "GEMINI_"),
        program=PROGRAM,
        scenario_end=({"model": {}},),
        bad_program=BOGUS_ID_PROGRAM,
        bad_flags=(),
        violation="unknown_id",
        live_line="violation error: unknown_id [s1] answer for unknown call id",
        signals=(signal.SIGINT, signal.SIGTERM),
        model="gemini-live",
        check_report=_gemini_report,
    ),
    Vendor(
        name="openai",
        flags=("--protocol", "openai"),
        env_keys=frozenset({"OPENAI_BASE_URL", "OPENAI_API_KEY", "SSL_CERT_FILE"}),
        sdk_prefixes=("OPENAI_",),
        program=OPENAI_PROGRAM_TEMPLATE.replace("EXTRA", "[]"),
        scenario_end=(),
        bad_program=OPENAI_PROGRAM_TEMPLATE.replace("EXTRA", "[call.call_id]"),
        bad_flags=("--held-answers", "30"),
        violation="duplicate_answer",
        live_line="violation error: duplicate_answer [s1] second output for call",
        signals=(signal.SIGINT,),
        model="gpt-realtime",
        check_report=_openai_report,
    ),
]


async def run_program(
    vendor: Vendor, server: asyncio.subprocess.Process, program: str
) -> tuple[int, str, str]:
    """Run ``program`` with only the emulator's printed environment for its SDK."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(vendor.sdk_prefixes)}
    env.update(await environment_lines(server, vendor.env_keys))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        program,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), seconds(60))
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.mark.parametrize("vendor", VENDORS, ids=[v.name for v in VENDORS])
async def test_printed_environment_points_a_program_at_the_emulator(
    vendor: Vendor, tmp_path: Path
) -> None:
    scenario = tmp_path / "scenario.json"
    steps = [
        {"expect_turn": {}},
        {"tool_call": [["get_weather", {"city": "Berlin"}]]},
        {"wait_answers": {}},
        {"say": "Berlin is cold."},
        {"turn_complete": {}},
        *vendor.scenario_end,
    ]
    scenario.write_text(json.dumps(steps))
    server = await asyncio.create_subprocess_exec(
        *CLI,
        "emulator",
        *vendor.flags,
        "--strict",
        "--scenario",
        str(scenario),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        code, out, err = await run_program(vendor, server, vendor.program)
        assert code == 0, err
        assert out.strip() == "Berlin is cold."
    finally:
        server.send_signal(signal.SIGTERM)
        summary, _ = await asyncio.wait_for(server.communicate(), seconds(30))
    assert server.returncode == 0
    assert summary.decode().splitlines()[-1] == "PASS: no violations"


@pytest.mark.parametrize(
    ("vendor", "signum"),
    [(v, s) for v in VENDORS for s in v.signals],
    ids=[f"{v.name}-{signal.Signals(s).name}" for v in VENDORS for s in v.signals],
)
async def test_a_violation_is_reported_live_in_the_summary_and_in_the_report(
    vendor: Vendor, signum: int, tmp_path: Path
) -> None:
    report = tmp_path / "report.json"
    server = await asyncio.create_subprocess_exec(
        *CLI,
        "emulator",
        *vendor.flags,
        "--strict",
        "--report",
        str(report),
        *vendor.bad_flags,
        stdout=asyncio.subprocess.PIPE,
    )
    assert server.stdout is not None
    try:
        code, _, err = await run_program(vendor, server, vendor.bad_program)
        assert code == 0, err
        live = (await asyncio.wait_for(server.stdout.readline(), seconds(60))).decode()
        assert live.startswith(vendor.live_line)
    finally:
        server.send_signal(signum)
        out, _ = await asyncio.wait_for(server.communicate(), seconds(30))
    assert server.returncode == 1  # --strict, and there was a violation
    summary = out.decode().splitlines()
    assert summary[0] == "summary: 1 connection(s), 1 violation(s) (1 error(s), 0 warning(s))"
    written = json.loads(report.read_text())
    assert [(v["kind"], v["session"]) for v in written["violations"]] == [(vendor.violation, "s1")]
    assert written["sessions"][0]["model"] == vendor.model
    vendor.check_report(summary, written)


async def test_a_violation_the_report_has_no_room_for_still_counts(tmp_path: Path) -> None:
    """``--report-mb`` bounds what is kept; the summary and ``--strict`` count every violation."""
    vendor, report = VENDORS[0], tmp_path / "report.json"
    server = await asyncio.create_subprocess_exec(
        *CLI,
        "emulator",
        "--strict",
        "--report-mb",
        "0.001",  # 1 KiB: less than one violation with what it carried
        "--report",
        str(report),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        code, _, err = await run_program(vendor, server, vendor.bad_program)
        assert code == 0, err
    finally:
        server.send_signal(signal.SIGTERM)
        out, _ = await asyncio.wait_for(server.communicate(), seconds(30))
    assert server.returncode == 1
    summary = out.decode().splitlines()
    assert "summary: 1 connection(s), 1 violation(s) (1 error(s), 0 warning(s))" in summary
    assert any(line.strip().startswith("the report keeps the newest: ") for line in summary)
    written = json.loads(report.read_text())
    assert written["violations"] == []  # no room for it, but counted
    assert written["violation_counts"] == {"error:unknown_id": 1}
    assert written["transcript_dropped"] > 0
    assert len(report.read_bytes()) < 64 << 10


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
        (
            ["--port", "99999"],
            "--port: 99999 is not a port: use a number from 0 to 65535",
        ),
        (["--port", "http"], "--port: 'http' is not a port: use a number from 0 to 65535"),
        (["--port", str(busy)], f"cannot listen on 127.0.0.1:{busy} ("),
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
        (["--report-mb", "lots"], "--report-mb needs a number of MiB, got 'lots'"),
        (["--report-mb", "0"], "--report-mb needs a number of MiB > 0, got '0'"),
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
