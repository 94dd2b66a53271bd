"""Recording a session: every frame both ways, no API key, redacted calls; reading it checked."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import livebridge
from livebridge import RecordingError, SessionOptions
from livebridge.connectors import secrets
from livebridge.emulator import Conversation, Emulator
from livebridge.events import TurnComplete
from livebridge.record import FORMAT_VERSION, read_recording, restore_audio
from livebridge.trace import TraceObserver
from tests.session_helpers import collect_until, open_session

SHIPPED = Path(__file__).parent / "data" / "demo_recording.jsonl"
SECRET = "AIzaRecordingTestKey0123456789"


def payment_tools() -> livebridge.ToolRegistry:
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def pay(card: str, amount: int) -> dict[str, Any]:
        """Charge a card."""
        return {"charged": amount, "card": card, "receipt": f"key {SECRET}"}

    return tools


async def one_payment(conv: Conversation) -> None:
    await conv.expect_turn()
    ids = await conv.tool_call([("pay", {"card": "4111-1111", "amount": 3})])
    await conv.wait_answers(ids)
    await conv.say("Paid.")
    await conv.turn_complete()


def hide_card(function: str, value: dict[str, Any]) -> dict[str, Any]:
    return {**value, "card": "***"} if "card" in value else value


async def record_payment(path: Path, audio: str) -> None:
    secrets.protect(SECRET)
    trace = TraceObserver(redact=hide_card)
    options = SessionOptions(record=str(path), record_audio=audio)  # type: ignore[arg-type]
    async with (
        Emulator(one_payment) as emu,
        open_session(emu, payment_tools(), options=options, observers=[trace]) as session,
    ):
        await session.send_audio(bytes(range(256)) * 4, rate=16_000)
        await session.send_text("Pay 3 euros")
        await collect_until(session, lambda event: isinstance(event, TurnComplete))
    assert emu.violations == []


async def test_a_session_is_recorded_both_ways_with_audio_reduced_and_calls_redacted(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pay.jsonl"
    await record_payment(path, "length")
    text = path.read_text()
    assert SECRET not in text and "4111" not in text
    recording = read_recording(str(path))
    assert recording.audio == "length"
    events = [e.ev for e in recording.entries]
    assert events[0] == "open" and events.count("close") == 1
    sent = [e.data["msg"] for e in recording.entries if e.ev == "send"]
    received = [e.data["msg"] for e in recording.entries if e.ev == "recv"]
    audio = [m["realtimeInput"]["audio"] for m in sent if "audio" in m.get("realtimeInput", {})]
    assert audio == [{"mimeType": "audio/pcm;rate=16000", "dataBytes": 1024}]
    calls = [m["toolCall"]["functionCalls"][0] for m in received if "toolCall" in m]
    assert calls[0]["args"] == {"card": "***", "amount": 3}
    answers = [m["toolResponse"]["functionResponses"][0] for m in sent if "toolResponse" in m]
    assert answers[0]["response"]["output"]["card"] == "***"
    assert "[redacted]" in answers[0]["response"]["output"]["receipt"]
    times = [e.t for e in recording.entries]
    assert times == sorted(times)
    assert any(m.get("serverContent", {}).get("turnComplete") for m in received)


async def test_a_gzip_recording_keeps_audio_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "pay.jsonl.gz"
    await record_payment(path, "keep")
    with gzip.open(path, "rt") as file:
        assert json.loads(file.readline()) == {"livebridge_recording": 1, "audio": "keep"}
    recording = read_recording(str(path))
    sent = [e.data["msg"] for e in recording.entries if e.ev == "send"]
    blobs = [m["realtimeInput"]["audio"] for m in sent if "audio" in m.get("realtimeInput", {})]
    assert livebridge.wire.b64decode(blobs[0]["data"]) == bytes(range(256)) * 4


def test_reduced_audio_is_restored_as_silence_of_the_recorded_length() -> None:
    blob = {"inlineData": {"mimeType": "audio/pcm;rate=24000", "dataBytes": 6}}
    restored = restore_audio({"serverContent": {"modelTurn": {"parts": [blob]}}})
    data = restored["serverContent"]["modelTurn"]["parts"][0]["inlineData"]["data"]
    assert livebridge.wire.b64decode(data) == bytes(6)


def lines_of_shipped() -> list[str]:
    return SHIPPED.read_text().splitlines(keepends=True)


@settings(max_examples=60, deadline=None)
@given(cut=st.integers(min_value=1, max_value=SHIPPED.stat().st_size - 2))
def test_a_truncated_recording_is_an_error_naming_its_last_line(
    tmp_path_factory: Any, cut: int
) -> None:
    data = SHIPPED.read_bytes()[:cut]
    path = tmp_path_factory.mktemp("cut") / "cut.jsonl"
    path.write_bytes(data)
    if data.endswith(b"\n"):
        read_recording(str(path))  # cut between lines: what is there reads
        return
    line = data.count(b"\n") + 1
    with pytest.raises(RecordingError, match=rf"cut\.jsonl:{line}: .*truncated"):
        read_recording(str(path))


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"t": 1.0, "conn": 1, "ev": "recv"\n', r":7: not valid JSON"),
        ("[1, 2]\n", r":7: expected a JSON object, got list"),
        ('{"t": "soon", "conn": 1, "ev": "recv", "msg": {}}\n', r":7: not a recording entry"),
        ('{"t": 1.0, "conn": 1, "ev": "teleport"}\n', r":7: not a recording entry"),
        ('{"t": 1.0, "conn": 1, "ev": "send", "msg": "hi"}\n', r":7: a send entry without"),
    ],
)
def test_a_corrupt_line_is_an_error_naming_it(tmp_path: Path, line: str, expected: str) -> None:
    lines = lines_of_shipped()
    lines[6] = line
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(lines))
    with pytest.raises(RecordingError, match=expected):
        read_recording(str(path))


@pytest.mark.parametrize(
    ("first", "expected"),
    [
        ('{"hello": 1}\n', r":1: not a livebridge recording"),
        (f'{{"livebridge_recording": {FORMAT_VERSION + 1}}}\n', r":1: .*newer.*upgrade"),
        ('{"livebridge_recording": 1, "audio": "mp3"}\n', r":1: unknown audio mode"),
        ("", r"empty file"),
    ],
)
def test_a_file_that_is_not_a_recording_says_so(tmp_path: Path, first: str, expected: str) -> None:
    path = tmp_path / "other.jsonl"
    path.write_text(first)
    with pytest.raises(RecordingError, match=expected):
        read_recording(str(path))


def test_a_broken_gzip_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl.gz"
    path.write_bytes(gzip.compress(SHIPPED.read_bytes())[:-40])
    with pytest.raises(RecordingError, match=r"broken\.jsonl\.gz: cannot read the recording"):
        read_recording(str(path))
