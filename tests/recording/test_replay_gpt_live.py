"""Replaying a GPT-Live recording: a real session (the unmodified openai SDK against the
emulator over TLS) is recorded, then its server events are played to the tools again through
a real ``LiveSession``, and the answers' fates, values and grouping are compared."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from asyncio.subprocess import PIPE
from pathlib import Path
from typing import Any

import anyio

import livebridge
from livebridge import LiveSession, SessionOptions
from livebridge.emulator import Emulator, LiveServerSession
from livebridge.emulator.openai_live.session import LiveScenario
from livebridge.recording.read import read_recording
from livebridge.recording.replay import replay
from tests.cli.test_cli_errors import one_line_failure
from tests.emulator.test_cli import CLI
from tests.emulator.test_openai_live_cli import KEYS as OPENAI_KEYS
from tests.recording.test_replay_cli import REPOSITORY, livebridge_replay
from tests.support.gemini_clients import environment_lines
from tests.support.gpt_live_sessions import MODEL
from tests.support.timing import seconds
from tests.test_readme import offline_environment

HERE = "tests.recording.test_replay_gpt_live"


def make_tools(
    oslo: int = 4, fail_booking: bool = False, booked: str = "Oslo", oslo_hangs: bool = False
) -> livebridge.ToolRegistry:
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def weather(city: str) -> dict[str, Any]:
        """The weather in a city."""
        if oslo_hangs and city == "Oslo":
            await anyio.Event().wait()  # until cancelled
        return {"city": city, "celsius": oslo if city == "Oslo" else 19}

    @tools.tool
    async def book(city: str, nights: int) -> dict[str, Any]:
        """Book a hotel."""
        if fail_booking:
            raise RuntimeError("the booking service is down")
        return {"booked": booked, "nights": nights}

    return tools


#: For ``livebridge replay``: the tools as recorded, and with one value changed.
tools = make_tools()
warmer = make_tools(oslo=9)


async def two_rounds(live: LiveServerSession) -> None:
    """Two parallel calls, then a continuation that calls once more, then a text answer."""
    live.next_calls.append([("weather", {"city": "Rome"})])
    await live.wait_until(lambda: live.audio_ms > 0)
    await live.delegate([("weather", {"city": "Oslo"}), ("book", {"city": "Oslo", "nights": 2})])


async def record(
    path: Path,
    scenario: LiveScenario = two_rounds,
    creates: int = 2,
    tools: livebridge.ToolRegistry | None = None,
) -> None:
    """A real session on the emulator's GPT-Live side, recorded, until the backend answered
    ``creates`` continuations and no response runs."""
    async with (
        Emulator(scenario, model=MODEL) as emu,
        LiveSession.connect(
            emu.client(),
            model=MODEL,
            tools=tools or make_tools(),
            options=SessionOptions(record=str(path)),
        ) as session,
    ):
        await session.send_audio(bytes(4800))
        assert emu.live is not None

        def finished() -> bool:
            sessions = emu.live.sessions if emu.live is not None else []
            backend = sessions[0].backend if sessions else None
            return backend is not None and backend.creates == creates and not backend.running

        await emu.wait_for(finished, timeout=30)


def outputs(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """The recorded outputs, each with how many response.create came before it."""
    found: list[tuple[int, dict[str, Any]]] = []
    creates = 0
    for entry in read_recording(path).entries:
        message = entry.data.get("msg") or {}
        if entry.ev == "send" and message.get("type") == "response.create":
            creates += 1
        elif entry.ev == "send" and message.get("type") == "response.item.create":
            found.append((creates, json.loads(message["item"]["output"])))
    return found


async def test_a_gpt_live_recording_replays_with_zero_divergence(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    await record(path)
    recorded = outputs(path)
    assert sorted((batch, str(body)) for batch, body in recorded) == sorted(
        [
            (0, str({"output": {"city": "Oslo", "celsius": 4}})),
            (0, str({"output": {"booked": "Oslo", "nights": 2}})),
            (1, str({"output": {"city": "Rome", "celsius": 19}})),
        ]
    )
    report = await replay(path, make_tools())
    assert report.ok, report.render()
    assert (report.answers, report.connections, report.recorded_connections) == (3, 1, 1)


async def test_a_changed_value_and_a_changed_fate_are_each_reported(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    await record(path)
    answered = {
        number
        for number, text in enumerate(path.read_text().splitlines(), start=1)
        if (json.loads(text).get("msg") or {}).get("type") == "response.item.create"
    }
    report = await replay(path, make_tools(oslo=9, fail_booking=True))
    kinds = sorted((d.kind, d.function, d.line in answered) for d in report.divergences)
    assert kinds == [("kind_changed", "book", True), ("value_changed", "weather", True)]
    changed = next(d for d in report.divergences if d.kind == "value_changed")
    assert "celsius: recorded 4, replayed 9" in changed.detail
    failed = next(d for d in report.divergences if d.kind == "kind_changed")
    assert "answered error, recorded ok" in failed.detail
    assert "RuntimeError" in failed.detail

    ignored = await replay(path, make_tools(booked="Bergen"), ignore_fields=["booked"])
    assert ignored.ok, ignored.render()


async def test_a_tool_gone_is_a_changed_fate_and_one_that_hangs_is_unanswered(
    tmp_path: Path,
) -> None:
    path = tmp_path / "live.jsonl"
    await record(path)
    fewer = make_tools()
    fewer.remove("book")  # the call is answered with an error at once
    report = await replay(path, fewer)
    assert [(d.kind, d.function) for d in report.divergences] == [("kind_changed", "book")]

    hanging = make_tools()
    hanging.remove("book")

    @hanging.tool
    async def book(city: str, nights: int) -> dict[str, Any]:
        """Book a hotel, never."""
        await anyio.Event().wait()
        return {}

    report = await replay(path, hanging, answer_timeout=1)
    found = [(d.kind, d.function) for d in report.divergences]
    assert ("unanswered", "book") in found, report.render()
    assert ("kind_changed", "book") not in found


async def test_the_command_exits_0_then_1_with_the_divergence_then_2_on_a_bad_target(
    tmp_path: Path,
) -> None:
    path = tmp_path / "live.jsonl"
    await record(path)
    same = livebridge_replay(str(path), f"{HERE}:tools")
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout == f"{path}: 3 answers on 1 of 1 connection(s) replayed, 0 divergence(s)\n"

    changed = livebridge_replay(str(path), f"{HERE}:warmer")
    assert changed.returncode == 1, changed.stdout + changed.stderr
    lines = changed.stdout.splitlines()
    assert lines[0].endswith("1 divergence(s)")
    assert "weather: the answer changed: output.celsius: recorded 4, replayed 9" in lines[1]
    assert "[value_changed, call call_" in lines[1]
    assert "Traceback" not in changed.stderr

    one_line_failure(livebridge_replay(str(path), f"{HERE}:nowhere"), "nowhere")


async def failing(live: LiveServerSession) -> None:
    """A response that fails after announcing a call, then one that calls once more."""
    await live.wait_until(lambda: live.audio_ms > 0)
    await live.delegate([("weather", {"city": "Oslo"})], end="failed")
    await live.delegate([("weather", {"city": "Rome"})])


async def failing_once_answered(live: LiveServerSession) -> None:
    """A response that fails only once its call was answered; the continuation the app asks
    for then (an output went out) calls once more."""
    live.next_calls.append([("weather", {"city": "Rome"})])
    await live.wait_until(lambda: live.audio_ms > 0)
    _, response, (oslo,) = await live.delegate([("weather", {"city": "Oslo"})], end=None)
    await live.wait_until(lambda: oslo not in live.backend.open)
    await live.end(response, "failed")


ROME = {"output": {"city": "Rome", "celsius": 19}}
OSLO = {"output": {"city": "Oslo", "celsius": 4}}


async def replayed(path: Path, tools: livebridge.ToolRegistry, **options: Any) -> Any:
    """``path`` replayed to a real session with ``tools``: the report and the emulator's session."""
    async with (
        Emulator(replay=path, **options) as emu,
        LiveSession.connect(emu.client(), model=MODEL, tools=tools),
    ):
        await emu.wait_for(lambda: emu.replay is not None and emu.replay.done, timeout=30)
    assert emu.replay is not None and emu.live is not None
    (session,) = emu.live.sessions
    return emu.replay.finish(), session


async def test_a_failed_backend_response_replays_without_a_fault(tmp_path: Path) -> None:
    """A response that failed after announcing a call drops it, in the replay as recorded: the
    app answers only the other call, and the emulator's gate finds no fault in that."""
    path = tmp_path / "failed.jsonl"
    await record(path, failing, creates=1, tools=make_tools(oslo_hangs=True))
    assert [body for _, body in outputs(path)] == [ROME]
    report, session = await replayed(path, make_tools(oslo_hangs=True))
    assert report.ok and report.answers == 1, report.render()
    assert session.verdicts == [] and session.backend.dropped and session.backend.creates == 1


async def test_answering_a_failed_responses_call_or_not_is_a_race_not_a_divergence(
    tmp_path: Path,
) -> None:
    """Whether the app answers a call before it hears that the call's response failed is a race
    between its handler and that event: the recording answered it and the replay did not, or
    the other way round; neither is a divergence, in a replay with the failure played at once
    (fast tools race it) or later (fast tools win)."""
    answered = tmp_path / "answered.jsonl"
    await record(answered, failing_once_answered, creates=2)
    assert outputs(answered) == [(0, OSLO), (1, ROME)]
    report, session = await replayed(answered, make_tools(oslo_hangs=True))
    assert report.ok and report.answers == 1, report.render()
    assert session.verdicts == [] and session.backend.dropped and session.backend.creates == 1
    report, session = await replayed(answered, make_tools())  # as recorded, or not: a race
    assert report.ok and report.answers in (1, 2), report.render()
    assert session.verdicts == []

    unanswered = tmp_path / "unanswered.jsonl"
    await record(unanswered, failing, creates=1, tools=make_tools(oslo_hangs=True))
    lines = [json.loads(line) for line in unanswered.read_text().splitlines()]
    failure = next(
        n
        for n, entry in enumerate(lines)
        if ((entry.get("msg") or {}).get("event") or {}).get("type") == "response.failed"
    )
    for entry in lines[failure:]:
        entry["t"] += seconds(2)  # the failure comes late: the app's answer is in first
    later = tmp_path / "later.jsonl"
    later.write_text("".join(json.dumps(entry) + "\n" for entry in lines))
    report, session = await replayed(later, make_tools(), pace="recorded")
    assert report.ok and report.answers == 1, report.render()
    sent = [
        json.loads(item.message["item"]["output"])
        for item in session.shared.transcript
        if item.direction == "client" and item.message.get("type") == "response.item.create"
    ]
    assert sent == [OSLO, ROME], sent
    # Oslo's continuation, then Rome's; or one for both, if Rome's call came before it went
    assert session.verdicts == [] and session.backend.creates in (1, 2)


async def test_outputs_grouped_otherwise_than_recorded_are_a_batch_split(tmp_path: Path) -> None:
    """A recording (edited) whose first output was followed by its own ``response.create``:
    the app, which sends both outputs before one, is reported splitting the batch."""
    path = tmp_path / "live.jsonl"
    await record(path)
    lines = path.read_text().splitlines(keepends=True)
    first = next(n for n, text in enumerate(lines) if '"type":"response.item.create"' in text)
    create = next(line for line in lines if '"type":"response.create"' in line)
    edited = tmp_path / "edited.jsonl"
    entry = json.loads(lines[first])
    moved = json.loads(create)
    moved["t"] = entry["t"]  # the create right after the first output, in time too
    edited.write_text("".join([*lines[: first + 1], json.dumps(moved) + "\n", *lines[first + 1 :]]))
    report = await replay(edited, make_tools())
    kinds = [d.kind for d in report.divergences]
    assert kinds and set(kinds) == {"batch_split"}, report.render()
    assert "recorded one response.create after call_" in report.divergences[0].detail


#: A separate program: a LiveSession on GPT-Live through the environment the emulator printed,
#: with one value changed, until its third call settled and the backend's last turn ended.
PROGRAM = """
import asyncio
import openai
from livebridge import LiveSession
from livebridge.protocol.events import ToolCallSettled, TurnComplete
from tests.recording.test_replay_gpt_live import make_tools

async def main():
    async with LiveSession.connect(
        openai.AsyncOpenAI(), model="gpt-live-1.1", tools=make_tools(oslo=9)
    ) as session:
        settled = 0
        async for event in session.events():
            settled += isinstance(event, ToolCallSettled)
            if settled == 3 and isinstance(event, TurnComplete):
                break

asyncio.run(main())
"""


async def test_the_emulator_command_replays_a_gpt_live_recording(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    await record(path)
    server = await asyncio.create_subprocess_exec(
        *CLI, "emulator", "--vendor", "openai", "--replay", str(path), stdout=PIPE
    )
    try:
        env = offline_environment(**await environment_lines(server, OPENAI_KEYS))
        program = await asyncio.create_subprocess_exec(
            sys.executable, "-c", PROGRAM, env=env, cwd=REPOSITORY
        )
        assert await asyncio.wait_for(program.wait(), 60) == 0
    finally:
        server.send_signal(signal.SIGINT)
        out, _ = await asyncio.wait_for(server.communicate(), 30)
    assert server.returncode == 0
    text = out.decode()
    assert f"{path}: 3 answers on 1 of 1 connection(s) replayed, 1 divergence(s)\n" in text
    assert "weather: the answer changed: output.celsius: recorded 4, replayed 9" in text
