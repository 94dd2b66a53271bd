"""Replaying recordings to an app's tools: no divergence when nothing changed, each change named."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from livebridge import LiveSession, ToolRegistry
from livebridge.cli import main
from livebridge.demo import FAST_PACE
from livebridge.demo.driver import CONFIG, MODEL, run_demo
from livebridge.emulator import Emulator
from livebridge.record import read_recording
from livebridge.replay import assert_replays, replay
from tests.replay_tools import broken_weather, demo_tools, replaced

SHIPPED = Path(__file__).parent / "data" / "demo_recording.jsonl"


def test_the_shipped_demo_recording_replays_without_divergence() -> None:
    report = assert_replays(str(SHIPPED), demo_tools())
    assert report.connections == 2
    assert report.answers >= 10


async def test_a_recorded_session_replays_with_zero_divergence_across_goaway_and_resumption(
    tmp_path: Path,
) -> None:
    path = tmp_path / "demo.jsonl.gz"
    await run_demo(pace=FAST_PACE, record=str(path))
    recording = read_recording(str(path))
    kinds = [(e.conn, e.ev, *e.data.get("msg", {})) for e in recording.entries]
    assert any(k[1] == "recv" and "goAway" in k for k in kinds)
    opens = [e for e in recording.entries if e.ev == "open"]
    assert [e.conn for e in opens] == [1, 2]
    assert opens[0].data["handle"] is None
    assert opens[1].data["handle"], "the second connection resumes with a recorded handle"
    assert {e.data["by"] for e in recording.entries if e.ev == "close"} == {"client"}

    report = await replay(recording, demo_tools())
    assert report.divergences == []
    assert report.connections == 2
    recorded_answers = sum(
        len(e.data["msg"]["toolResponse"]["functionResponses"])
        for e in recording.entries
        if e.ev == "send" and "toolResponse" in e.data["msg"]
    )
    assert report.answers == recorded_answers


async def test_a_tool_changed_to_raise_is_reported_with_the_call() -> None:
    report = await replay(str(SHIPPED), broken_weather())
    changed = [d for d in report.divergences if d.kind == "kind_changed"]
    assert changed, report.render()
    assert {d.function for d in changed} == {"get_weather"}
    recording = read_recording(str(SHIPPED))
    weather_ids = {
        call["id"]
        for e in recording.entries
        if e.ev == "recv" and "toolCall" in e.data["msg"]
        for call in e.data["msg"]["toolCall"]["functionCalls"]
        if call["name"] == "get_weather"
    }
    assert {d.call_id for d in changed} == weather_ids
    for divergence in changed:
        assert "answered error, recorded ok" in divergence.detail
        assert f"line {divergence.line}: kind_changed get_weather" in str(divergence)


def test_assert_replays_fails_with_the_report() -> None:
    with pytest.raises(AssertionError, match="kind_changed get_weather"):
        assert_replays(str(SHIPPED), broken_weather())


async def test_a_call_left_unanswered_is_reported() -> None:
    async def get_time(city: str) -> str:
        """The local time in a city (never returns)."""
        await anyio.sleep(60)
        return "never"

    tools = replaced(demo_tools(), get_time, idempotent=True)
    report = await replay(str(SHIPPED), tools, answer_timeout=1.0)
    unanswered = [d for d in report.divergences if d.kind == "unanswered"]
    assert {d.function for d in unanswered} == {"get_time"}, report.render()


def test_the_replay_command_prints_the_report_and_exits_by_divergence(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(Path(__file__).parent.parent)
    assert main(["replay", str(SHIPPED), "tests.replay_tools:registry"]) == 0
    out = capsys.readouterr().out
    assert "0 divergence(s)" in out

    assert main(["replay", str(SHIPPED), "tests.replay_tools:broken"]) == 1
    out = capsys.readouterr().out
    assert "divergence(s)" in out and "kind_changed get_weather" in out


def test_the_replay_command_rejects_a_corrupt_recording_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = SHIPPED.read_text().splitlines(keepends=True)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join([*lines[:5], "{not json\n", *lines[6:]]))
    assert main(["replay", str(bad), "tests.replay_tools:registry"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{bad}:6: not valid JSON" in err
    assert "Traceback" not in err


def test_the_shipped_recording_holds_no_audio_and_a_versioned_header() -> None:
    first, *rest = SHIPPED.read_text().splitlines()
    assert json.loads(first) == {"livebridge_recording": 1, "audio": "length"}
    assert '"data":' not in "".join(rest)


# -- the emulator in replay mode, for any google-genai program -----------------------------------


async def serve_replay_to(emu: Emulator, tools: ToolRegistry) -> None:
    """Run a ``LiveSession`` on ``emu`` until both recorded connections were served and settled."""

    def settled() -> bool:
        sessions = emu.sessions
        return (
            len(sessions) == 2
            and bool(sessions[1].answered)
            and not any(s.pending_calls for s in sessions)
        )

    async with (
        LiveSession.connect(emu.client(), model=MODEL, tools=tools, config=CONFIG) as session,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(drain, session)
        await emu.wait_for(settled, timeout=30)
        tg.cancel_scope.cancel()


async def drain(session: LiveSession) -> None:
    async for _ in session.events():
        pass


async def test_the_emulator_serves_a_recording_on_both_connections_with_the_checker_on() -> None:
    recording = read_recording(str(SHIPPED))
    recorded_answers = {
        r["id"]
        for e in recording.entries
        if e.ev == "send" and "toolResponse" in e.data["msg"]
        for r in e.data["msg"]["toolResponse"]["functionResponses"]
    }
    async with Emulator(replay=str(SHIPPED)) as emu:
        await serve_replay_to(emu, demo_tools())
        assert emu.violations == []
        assert emu.sessions[1].resumed_from is not None
        answered = {i for s in emu.sessions for i in s.answered}
        issued = [
            c["id"]
            for t in emu.transcript
            if t.direction == "server" and "toolCall" in t.message
            for c in t.message["toolCall"]["functionCalls"]
        ]
    assert not set(issued) & recorded_answers, "call ids are issued afresh"
    assert len(answered) >= len(recorded_answers)


def test_the_emulator_command_refuses_a_corrupt_recording_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(SHIPPED.read_text()[:-5])
    assert main(["emulator", "--replay", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the file ends mid-line" in err
    assert f"bad.jsonl:{SHIPPED.read_text().count(chr(10))}:" in err
