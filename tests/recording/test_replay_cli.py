"""``livebridge replay`` and ``livebridge emulator --replay`` as a user runs them, and the pytest
helper as docs/recording.md shows it."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from livebridge import LiveSession, ToolRegistry
from livebridge.cli.main import main
from livebridge.demo import FAST_PACE
from livebridge.demo.driver import CONFIG, MODEL, run_demo
from livebridge.emulator import Emulator
from livebridge.recording.read import FORMAT_VERSION, read_recording
from livebridge.recording.replay import assert_replays
from tests.emulator.test_cli import CLI
from tests.support.gemini_clients import environment_lines
from tests.support.replay_tools import a_recording, answer, demo_tools, tool_call
from tests.support.timing import seconds
from tests.test_readme import block, offline_environment

REPOSITORY = Path(__file__).resolve().parents[2]
SHIPPED = REPOSITORY / "tests" / "data" / "demo_recording.jsonl"


def livebridge_replay(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "livebridge", "replay", *args],
        cwd=REPOSITORY,
        env=offline_environment(),
        capture_output=True,
        text=True,
        timeout=seconds(120),
        check=False,
    )


def recorded_answers(path: Path) -> int:
    return sum(
        len(e.data["msg"]["toolResponse"]["functionResponses"])
        for e in read_recording(str(path)).entries
        if e.ev == "send" and "toolResponse" in e.data["msg"]
    )


def test_a_fresh_recording_replays_with_zero_divergence_by_the_command_and_the_helper(
    tmp_path: Path,
) -> None:
    path = tmp_path / "demo.jsonl.gz"
    anyio.run(lambda: run_demo(pace=FAST_PACE, record=str(path)))
    recording = read_recording(str(path))
    assert any(e.ev == "recv" and "goAway" in e.data["msg"] for e in recording.entries)
    opens = [e for e in recording.entries if e.ev == "open"]
    assert [e.conn for e in opens] == [1, 2]
    assert opens[0].data["handle"] is None
    assert opens[1].data["handle"], "the second connection resumes with a recorded handle"

    result = livebridge_replay(str(path), "tests.support.replay_tools:registry")
    assert result.returncode == 0, result.stdout + result.stderr
    answers = recorded_answers(path)
    assert result.stdout == (
        f"{path}: {answers} answers on 2 of 2 connection(s) replayed, 0 divergence(s)\n"
    )
    assert result.stderr == ""

    report = assert_replays(path, demo_tools())
    assert (report.answers, report.connections) == (answers, 2)


def test_the_command_prints_each_divergence_and_exits_1_without_a_traceback() -> None:
    result = livebridge_replay(str(SHIPPED), "tests.support.replay_tools:broken", "--pace", "fast")
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].endswith("2 divergence(s)")
    for line in lines[1:]:
        assert ": get_weather: answered error, recorded ok (RuntimeError: The tool raised " in line
        assert line.endswith("]") and "[kind_changed, call function-call-" in line
    assert len(lines) == 3
    # What the tools logged explains the divergences: one line each, after the report.
    assert "Traceback" not in result.stderr
    assert result.stderr.count("RuntimeError: weather backend unreachable") == 2
    assert all(
        line.startswith("livebridge replay: the tools logged: ")
        for line in result.stderr.splitlines()
    )


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda text: text[:-5], "the file ends mid-line (was it truncated?)"),
        (lambda text: text.replace('"ev":"send"', '"ev":"sent"', 1), "not a recording entry"),
    ],
)
def test_the_command_names_the_line_of_a_cut_or_corrupt_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: object, expected: str
) -> None:
    text = SHIPPED.read_text()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(damage(text))  # type: ignore[operator]
    assert main(["replay", str(bad), "tests.support.replay_tools:registry"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"livebridge replay: {bad}:") and expected in err
    line = int(err.split(f"{bad}:")[1].split(":")[0])
    assert line > 1


def test_a_bad_answer_timeout_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(
            ["replay", str(SHIPPED), "tests.support.replay_tools:registry", "--answer-timeout", "0"]
        )
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a positive number of seconds" in err


def test_the_shipped_recording_holds_no_audio_and_a_versioned_header() -> None:
    first, *rest = SHIPPED.read_text().splitlines()
    assert json.loads(first) == {"livebridge_recording": FORMAT_VERSION, "audio": "length"}
    assert '"data":' not in "".join(rest)


def test_the_readme_pytest_helper_snippet_runs_in_a_test_suite(tmp_path: Path) -> None:
    test_file = tmp_path / "test_recorded.py"
    test_file.write_text(block("Replaying it", "docs/recording.md"))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
        cwd=REPOSITORY,  # where the page's recording path is
        env=offline_environment(),
        capture_output=True,
        text=True,
        timeout=seconds(120),
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


# -- the emulator in replay mode, for any google-genai program -----------------------------------


async def serve_replay_to(emu: Emulator, tools: ToolRegistry) -> None:
    """Run a ``LiveSession`` on ``emu`` until both recorded connections were served."""
    async with (
        LiveSession.connect(emu.client(), model=MODEL, tools=tools, config=CONFIG) as session,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(drain, session)
        await emu.wait_for(lambda: emu.replay is not None and emu.replay.done, timeout=30)
        tg.cancel_scope.cancel()


async def drain(session: LiveSession) -> None:
    async for _ in session.events():
        pass


async def test_the_emulator_serves_a_recording_on_both_connections_with_the_checker_on() -> None:
    recording = read_recording(str(SHIPPED))
    recorded_ids = {
        r["id"]
        for e in recording.entries
        if e.ev == "send" and "toolResponse" in e.data["msg"]
        for r in e.data["msg"]["toolResponse"]["functionResponses"]
    }
    async with Emulator(replay=str(SHIPPED)) as emu:
        await serve_replay_to(emu, demo_tools())
        await emu.settled()
        assert emu.violations == []
        assert emu.sessions[1].resumed_from is not None
        answered = {i for s in emu.sessions for i in s.answered}
        issued = [
            c["id"]
            for t in emu.transcript
            if t.direction == "server" and "toolCall" in t.message
            for c in t.message["toolCall"]["functionCalls"]
        ]
    assert not set(issued) & recorded_ids, "call ids are issued afresh"
    assert len(answered) >= len(recorded_ids)
    assert emu.replay is not None
    assert emu.replay.finish().ok, emu.replay.finish().render()


def test_the_emulator_command_refuses_a_corrupt_recording_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(SHIPPED.read_text()[:-5])
    assert main(["emulator", "--replay", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the file ends mid-line" in err
    assert f"bad.jsonl:{SHIPPED.read_text().count(chr(10))}:" in err


#: A plain google-genai program that answers every call with an error, until the turn ends.
ERROR_PROGRAM = """
import asyncio
from google import genai
from google.genai import types

async def main():
    config = types.LiveConnectConfig(response_modalities=["TEXT"])
    async with genai.Client().aio.live.connect(model="gemini-live", config=config) as session:
        async for message in session.receive():
            if message.tool_call:
                answers = [types.FunctionResponse(id=c.id, name=c.name,
                                                  response={"error": {"message": "down"}})
                           for c in message.tool_call.function_calls]
                await session.send_tool_response(function_responses=answers)
            if message.server_content and message.server_content.turn_complete:
                break

asyncio.run(main())
"""


async def test_the_emulator_command_prints_the_divergence_report_at_exit(tmp_path: Path) -> None:
    done = {"ev": "recv", "msg": {"serverContent": {"turnComplete": True}}}
    path = a_recording(tmp_path, tool_call("rec-1"), answer("rec-1"), done)
    server = await asyncio.create_subprocess_exec(
        *CLI,
        "emulator",
        "--replay",
        str(path),
        "--answer-timeout",
        "5",
        "--pace",
        "recorded",
        stdout=asyncio.subprocess.PIPE,
    )
    assert server.stdout is not None
    try:
        env = offline_environment(**await environment_lines(server))
        program = await asyncio.create_subprocess_exec(sys.executable, "-c", ERROR_PROGRAM, env=env)
        assert await asyncio.wait_for(program.wait(), seconds(60)) == 0
    finally:
        server.send_signal(signal.SIGINT)
        out, _ = await asyncio.wait_for(server.communicate(), seconds(30))
    assert server.returncode == 0
    assert (
        f"{path}: 1 answers on 1 of 1 connection(s) replayed, 1 divergence(s)\n"
        "  line 4: get_time: answered error, recorded ok (down) "
        "[kind_changed, call rec-1]\n"
    ) in out.decode()


def test_a_changed_value_is_a_divergence_naming_the_field_unless_ignored() -> None:
    """A tool that answers ``ok`` with other values than the recorded ones diverges, with the
    field, the recorded and the replayed value on one line; ``--ignore-field`` leaves it out."""
    result = livebridge_replay(str(SHIPPED), "tests.support.replay_tools:wrong_city")
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    weather = calls_of_function(SHIPPED, "get_weather")
    assert lines[0].endswith(f"{len(weather)} divergence(s)")
    for line in lines[1:]:
        assert ': get_weather: the answer changed: output.city: recorded "' in line
        assert 'replayed "WRONG CITY" [value_changed, call function-call-' in line
    assert result.stderr == ""  # the tools logged nothing

    ignored = livebridge_replay(
        str(SHIPPED), "tests.support.replay_tools:wrong_city", "--ignore-field", "city"
    )
    assert ignored.returncode == 0, ignored.stdout + ignored.stderr
    by_path = livebridge_replay(
        str(SHIPPED), "tests.support.replay_tools:wrong_city", "--ignore-field", "output.city"
    )
    assert by_path.returncode == 0, by_path.stdout + by_path.stderr
    elsewhere = livebridge_replay(
        str(SHIPPED), "tests.support.replay_tools:wrong_city", "--ignore-field", "city.output"
    )
    assert elsewhere.returncode == 1


def test_a_recorded_error_answered_again_passes_in_silence(tmp_path: Path) -> None:
    """An error the recording has, answered again as the same error, is no divergence and
    nothing on stderr: a run that passed says nothing about errors."""
    call = tool_call("rec-1")
    failed = answer("rec-1")
    failed["msg"]["toolResponse"]["functionResponses"][0]["response"] = {
        "error": {"type": "RuntimeError", "message": "clock backend down", "retryable": False}
    }
    path = a_recording(tmp_path, call, failed)
    result = livebridge_replay(str(path), "tests.support.replay_tools:broken_clock")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.endswith("0 divergence(s)\n") and result.stderr == ""


def calls_of_function(path: Path, name: str) -> list[str]:
    return [
        call["id"]
        for e in read_recording(str(path)).entries
        if e.ev == "recv" and "toolCall" in e.data["msg"]
        for call in e.data["msg"]["toolCall"]["functionCalls"]
        if call["name"] == name
    ]
