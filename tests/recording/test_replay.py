"""Replaying recordings to an app's tools through the emulator: no divergence when nothing
changed, each change named by the recording's line and call id."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from livebridge.emulator import Emulator
from livebridge.recording.read import read_recording
from livebridge.recording.replay import assert_replays, replay
from livebridge.recording.report import (
    MIN_ANSWER_TIMEOUT,
    RECONNECT_WAIT,
    SLOW_FACTOR,
    SLOW_MARGIN,
    default_answer_timeout,
)
from tests.support.replay_tools import (
    a_recording,
    answer,
    broken_weather,
    demo_tools,
    replaced,
    tool_call,
)
from tests.support.timing import seconds

SHIPPED = Path(__file__).parent.parent / "data" / "demo_recording.jsonl"


def calls_of(path: Path, name: str) -> dict[str, int]:
    """The recorded ids of ``name``'s calls, each with the line of its recorded answer."""
    recording = read_recording(str(path))
    return {
        answer["id"]: entry.line
        for entry in recording.entries
        if entry.ev == "send" and "toolResponse" in entry.data["msg"]
        for answer in entry.data["msg"]["toolResponse"]["functionResponses"]
        if answer["name"] == name
    }


def test_the_shipped_demo_recording_replays_without_divergence() -> None:
    report = assert_replays(str(SHIPPED), demo_tools())
    assert (report.connections, report.recorded_connections) == (2, 2)
    assert report.answers == 12


async def test_a_tool_changed_to_raise_is_reported_with_the_recorded_call_and_line() -> None:
    report = await replay(str(SHIPPED), broken_weather())
    assert {d.kind for d in report.divergences} == {"kind_changed"}, report.render()
    recorded = calls_of(SHIPPED, "get_weather")
    assert {d.call_id: d.line for d in report.divergences} == recorded
    for divergence in report.divergences:
        assert divergence.function == "get_weather"
        assert divergence.detail.startswith("answered error, recorded ok")
        assert str(divergence).startswith(f"line {divergence.line}: get_weather: answered error")
        assert str(divergence).endswith(f" [kind_changed, call {divergence.call_id}]")


def test_assert_replays_fails_with_the_report() -> None:
    with pytest.raises(
        AssertionError, match=r"get_weather: answered error, recorded ok .*\[kind_changed"
    ):
        assert_replays(str(SHIPPED), broken_weather())


@pytest.mark.slow
async def test_a_call_left_unanswered_is_reported() -> None:
    async def get_time(city: str) -> str:
        """The local time in a city (never returns)."""
        await anyio.sleep(60)
        return "never"

    tools = replaced(demo_tools(), get_time, idempotent=True)
    # The bound of every wait for an answer: the calls answered beside get_time must be in by
    # then, and a loaded machine has taken over a second to answer them.
    timeout = seconds(2.0)
    report = await replay(str(SHIPPED), tools, answer_timeout=timeout)
    unanswered = [d for d in report.divergences if d.kind == "unanswered"]
    assert {d.call_id: d.line for d in unanswered} == calls_of(SHIPPED, "get_time"), report.render()
    assert all(f"no answer within {timeout:g} s" in d.detail for d in unanswered), report.render()
    # With the call still open no new handle could be issued: the session resumed an older one.
    (changed,) = [d for d in report.divergences if d.kind == "handle_changed"]
    assert changed.line == read_recording(str(SHIPPED)).connections()[1][0].line
    assert len(report.divergences) == len(unanswered) + 1


async def test_an_answer_far_slower_than_recorded_is_reported_with_the_threshold() -> None:
    recorded = read_recording(str(SHIPPED))
    seconds = SLOW_MARGIN + 0.5  # the recorded get_time answers took milliseconds

    async def get_time(city: str) -> str:
        """The local time in a city (slowly)."""
        await anyio.sleep(seconds)
        return "12:00"

    tools = replaced(demo_tools(), get_time, idempotent=True)
    report = await replay(recorded, tools)
    slow = [d for d in report.divergences if d.kind == "slow"]
    assert {d.call_id for d in slow} == set(calls_of(SHIPPED, "get_time")), report.render()
    assert all(f"(over {SLOW_FACTOR:g}x + {SLOW_MARGIN:g} s)" in d.detail for d in slow)


def test_the_default_answer_timeout_is_ten_times_the_slowest_recorded_answer() -> None:
    recording = read_recording(str(SHIPPED))
    issued = {
        call["id"]: e.t
        for e in recording.entries
        if e.ev == "recv" and "toolCall" in e.data["msg"]
        for call in e.data["msg"]["toolCall"]["functionCalls"]
    }
    slowest = max(
        e.t - issued[answer["id"]]
        for e in recording.entries
        if e.ev == "send" and "toolResponse" in e.data["msg"]
        for answer in e.data["msg"]["toolResponse"]["functionResponses"]
    )
    assert default_answer_timeout(recording) == pytest.approx(max(MIN_ANSWER_TIMEOUT, 10 * slowest))
    assert Emulator(replay=recording).replay.answer_timeout == default_answer_timeout(recording)  # type: ignore[union-attr]
    assert Emulator(replay=recording, answer_timeout=2).replay.answer_timeout == 2  # type: ignore[union-attr]


async def test_recorded_pace_takes_about_the_recorded_duration() -> None:
    recording = read_recording(str(SHIPPED))
    recorded = sum(conn[-1].t - conn[0].t for conn in recording.connections())
    began = time.monotonic()
    report = await replay(recording, demo_tools(), pace="recorded")
    elapsed = time.monotonic() - began
    assert report.ok, report.render()
    assert 0.8 * recorded <= elapsed <= recorded + seconds(20)


async def test_an_answer_the_recording_never_had_names_the_line_of_its_call(
    tmp_path: Path,
) -> None:
    # The recorded session ended before "late" was answered; the app answers it now.
    path = a_recording(tmp_path, tool_call("kept", "late"), answer("kept"))
    # The hand-written answer's value is a placeholder: not compared.
    report = await replay(path, demo_tools(), ignore_fields=["output"])
    unexpected = [d for d in report.divergences if d.kind == "unexpected_answer"]
    assert [(d.line, d.call_id) for d in unexpected] == [(3, "late")], report.render()
    assert unexpected[0].detail == "answered ok, the recording has no answer for it"
    # ... and it came in the same message as "kept", which was answered alone.
    assert [d.kind for d in report.divergences if d.line == 4] == ["batch_split"]


async def test_a_second_answer_names_the_line_of_the_recorded_one(tmp_path: Path) -> None:
    from google.genai import types

    path = a_recording(tmp_path, tool_call("once"), answer("once"))
    async with (
        Emulator(replay=path) as emu,
        emu.client().aio.live.connect(model="gemini-live", config={}) as session,
    ):
        async for message in session.receive():
            if message.tool_call and message.tool_call.function_calls:
                (call,) = message.tool_call.function_calls
                break
        for _ in range(2):
            response = types.FunctionResponse(id=call.id, name=call.name, response={"output": {}})
            await session.send_tool_response(function_responses=[response])
        await emu.wait_for(lambda: emu.replay is not None and emu.replay.done)
    assert emu.replay is not None
    report = emu.replay.finish()
    assert [str(d) for d in report.divergences] == [
        "line 4: get_time: answered again (ok), recorded 1 answer(s) [unexpected_answer, call once]"
    ]
    assert [v.kind for v in emu.violations] == ["duplicate_answer"]


async def test_a_recording_cut_by_its_size_bound_replays_what_it_holds(tmp_path: Path) -> None:
    lines = SHIPPED.read_text().splitlines(keepends=True)[:24]  # cut inside the book_table stream
    lines.append('{"t":1.3,"conn":1,"ev":"truncated","limit":9000}\n')
    path = tmp_path / "cut.jsonl"
    path.write_text("".join(lines))
    report = await replay(path, demo_tools())
    assert report.ok, report.render()
    assert report.truncated_at == 25
    assert "the recording was cut at line 25" in report.render()


async def test_a_connection_the_app_never_opened_is_reported_at_the_deadline() -> None:
    recording = read_recording(str(SHIPPED))
    # Without the goAway the app has no reason to leave the first connection.
    recording.entries = [e for e in recording.entries if "goAway" not in e.data.get("msg", {})]
    second = recording.connections()[1][0]
    report = await replay(recording, demo_tools(), deadline=3.0)
    assert [str(d) for d in report.divergences] == [
        f"line {second.line}: connection 2 of 2 was never opened: no reconnection "
        "[connection_missing]"
    ]
    assert (report.connections, report.recorded_connections) == (1, 2)


@pytest.mark.slow
async def test_a_connection_the_app_never_opens_ends_the_replay_after_the_answer_timeout() -> None:
    """Not at the deadline (300 s by default): the app left the first connection's recorded
    end behind it and had ``RECONNECT_WAIT`` to open the next one."""
    recording = read_recording(str(SHIPPED))
    recording.entries = [e for e in recording.entries if "goAway" not in e.data.get("msg", {})]
    began = time.monotonic()
    report = await replay(recording, demo_tools(), answer_timeout=seconds(3.0))  # all answer
    assert time.monotonic() - began < RECONNECT_WAIT + seconds(20)
    assert [d.kind for d in report.divergences] == ["connection_missing"]
