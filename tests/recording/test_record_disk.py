"""Recording to a disk that is full: an error naming the path at ``connect`` when the recording
cannot begin; a failure mid-session ends the recording only, with an observer event."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import livebridge
from livebridge import RecordingError, SessionOptions
from livebridge.calls.observers import Recorder, RecordingFailed
from livebridge.emulator import Conversation, Emulator
from livebridge.protocol.events import Closed, SessionEvent, ToolCallSettled
from tests.support.gemini_sessions import collect_until, of_type, open_session

TURNS = 12


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 64 KiB filesystem (tmpfs), unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "--lazy", str(mount)], check=True)


def fill(disk: Path) -> None:
    """Write until the filesystem refuses: ENOSPC from here on."""
    with open(disk / "filler", "wb", buffering=0) as file, pytest.raises(OSError, match="No space"):
        while True:
            file.write(bytes(4096))


def lookup_tools() -> livebridge.ToolRegistry:
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def lookup(city: str) -> dict[str, Any]:
        """Look a city up."""
        return {"city": city, "notes": "n" * 4000}

    return tools


async def test_a_recording_on_a_full_disk_is_refused_at_connect_naming_the_path(
    tiny_disk: Path,
    gemini_emulator: Emulator,
) -> None:
    fill(tiny_disk)
    path = tiny_disk / "session.jsonl"
    with pytest.raises(RecordingError, match="No space left on device") as caught:
        async with (
            open_session(gemini_emulator, lookup_tools(), options=SessionOptions(record=str(path))),
        ):
            raise AssertionError("connect should have refused the recording")
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


async def test_a_recording_that_cannot_be_written_is_refused_at_connect(
    gemini_emulator: Emulator,
) -> None:
    with pytest.raises(RecordingError, match=r"/dev/full: No space left"):
        async with (
            open_session(
                gemini_emulator, lookup_tools(), options=SessionOptions(record="/dev/full")
            ),
        ):
            raise AssertionError("connect should have refused the recording")
    with pytest.raises(RecordingError, match=r"/nonexistent/dir/x\.jsonl: No such file"):
        async with (
            open_session(
                gemini_emulator,
                lookup_tools(),
                options=SessionOptions(record="/nonexistent/dir/x.jsonl"),
            ),
        ):
            raise AssertionError("connect should have refused the recording")


async def test_a_disk_that_fills_mid_session_ends_the_recording_not_the_session(
    tiny_disk: Path,
) -> None:
    path = tiny_disk / "session.jsonl"

    async def scenario(conv: Conversation) -> None:
        for turn in range(TURNS):
            await conv.expect_turn(timeout=30)
            ids = await conv.tool_call([("lookup", {"city": f"city-{turn}"})])
            await conv.wait_answers(ids, timeout=30)
            await conv.say("Done.")
            await conv.turn_complete()
        await conv.expect_turn(timeout=30)

    recorder = Recorder()
    events: list[SessionEvent] = []
    options = SessionOptions(record=str(path), record_audio="keep")
    async with Emulator(scenario) as emu:
        async with open_session(
            emu, lookup_tools(), options=options, observers=[recorder]
        ) as session:
            for turn in range(TURNS):
                await session.send_audio(bytes(8000), rate=16_000)
                await session.send_text(f"turn {turn}")
                events += await collect_until(session, lambda e: isinstance(e, ToolCallSettled))
        async for event in session.events():
            events.append(event)
    settled = of_type(events, ToolCallSettled)
    assert [e.outcome for e in settled] == ["ok"] * TURNS
    assert isinstance(events[-1], Closed) and events[-1].error is None
    (failed,) = recorder.of(RecordingFailed)
    assert failed.path == str(path) and "No space left on device" in failed.reason
    assert path.stat().st_size <= 64 * 1024  # what fitted stays
