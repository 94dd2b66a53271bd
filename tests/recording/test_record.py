"""Recording a session: every frame both ways, no API key, redacted calls; reading it checked."""

from __future__ import annotations

import gzip
import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import livebridge.protocol.encoding
from livebridge import RecordingError, SessionOptions
from livebridge.calls.observers import Recorder, RecordingTruncated
from livebridge.emulator import Conversation, Emulator
from livebridge.observe.trace import TraceObserver
from livebridge.protocol import secrets
from livebridge.protocol.events import SessionEvent, ToolCallSettled, TurnComplete
from livebridge.recording.read import FORMAT_VERSION, read_recording, restore_audio
from tests.support.gemini_sessions import collect_until, open_session
from tests.support.hypothesis_profiles import examples

SHIPPED = Path(__file__).parent.parent / "data" / "demo_recording.jsonl"
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
    """The trace hook: no card number, as a field or inside an error's message."""
    hidden = {**value, "card": "***"} if "card" in value else dict(value)
    if isinstance(hidden.get("message"), str):
        hidden["message"] = re.sub(r"\d{4}-\d{4}", "***", hidden["message"])
    return hidden


async def record_payment(
    path: Path,
    audio: str,
    tools: livebridge.ToolRegistry | None = None,
    max_bytes: int = 1 << 20,
    recorder: Recorder | None = None,
) -> list[SessionEvent]:
    """Record one paid turn; the session's events up to its ``TurnComplete``."""
    secrets.protect(SECRET)
    trace = TraceObserver(redact=hide_card)
    options = SessionOptions(
        record=str(path),
        record_audio=audio,  # type: ignore[arg-type]
        record_max_bytes=max_bytes,
    )
    observers = [trace, recorder] if recorder else [trace]
    async with (
        Emulator(one_payment) as emu,
        open_session(
            emu, tools or payment_tools(), options=options, observers=observers
        ) as session,
    ):
        await session.send_audio(bytes(range(256)) * 4, rate=16_000)
        await session.send_text("Pay 3 euros")
        events = await collect_until(session, lambda event: isinstance(event, TurnComplete))
    assert emu.violations == []
    return events


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
        assert json.loads(file.readline()) == {"livebridge_recording": 2, "audio": "keep"}
    recording = read_recording(str(path))
    sent = [e.data["msg"] for e in recording.entries if e.ev == "send"]
    blobs = [m["realtimeInput"]["audio"] for m in sent if "audio" in m.get("realtimeInput", {})]
    assert livebridge.protocol.encoding.b64decode(blobs[0]["data"]) == bytes(range(256)) * 4


def test_reduced_audio_is_restored_as_silence_of_the_recorded_length() -> None:
    blob = {"inlineData": {"mimeType": "audio/pcm;rate=24000", "dataBytes": 6}}
    restored = restore_audio({"serverContent": {"modelTurn": {"parts": [blob]}}})
    data = restored["serverContent"]["modelTurn"]["parts"][0]["inlineData"]["data"]
    assert livebridge.protocol.encoding.b64decode(data) == bytes(6)


def lines_of_shipped() -> list[str]:
    return SHIPPED.read_text().splitlines(keepends=True)


@settings(max_examples=examples(60), deadline=None)
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
        ('{"livebridge_recording": 2, "audio": "mp3"}\n', r":1: unknown audio mode"),
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


async def test_an_error_answer_passes_the_redact_hook(tmp_path: Path) -> None:
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def pay(card: str, amount: int) -> dict[str, Any]:
        """Charge a card."""
        raise livebridge.ToolError(f"card {card} declined")  # its text is sent to the model

    path = tmp_path / "declined.jsonl"
    events = await record_payment(path, "length", tools)
    (settled,) = [e for e in events if isinstance(e, ToolCallSettled)]
    assert settled.outcome == "error" and settled.error is not None
    assert settled.error["message"] == "card 4111-1111 declined"
    text = path.read_text()
    assert "4111" not in text
    recording = read_recording(str(path))
    (answer,) = [
        r["response"]
        for e in recording.entries
        if e.ev == "send" and "toolResponse" in e.data["msg"]
        for r in e.data["msg"]["toolResponse"]["functionResponses"]
    ]
    assert answer["error"]["message"] == "card *** declined"


async def test_the_size_bound_ends_the_recording_with_a_truncated_line_and_the_session_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "bounded.jsonl"
    recorder = Recorder()
    with caplog.at_level(logging.WARNING, logger="livebridge.recording.record"):
        events = await record_payment(path, "keep", max_bytes=1500, recorder=recorder)
    # The session went on to the end of the turn with its answer.
    assert [e.outcome for e in events if isinstance(e, ToolCallSettled)] == ["ok"]
    data = path.read_bytes()
    assert len(data) <= 1500
    last = json.loads(data.splitlines()[-1])
    assert last["ev"] == "truncated" and last["limit"] == 1500
    recording = read_recording(str(path))
    assert recording.truncated is not None
    assert recording.truncated.line == data.count(b"\n")
    assert recorder.of(RecordingTruncated) == [RecordingTruncated(str(path), 1500)]
    assert any("reached 1500 bytes" in r.getMessage() for r in caplog.records)


def test_a_line_after_the_truncated_line_is_an_error_naming_it(tmp_path: Path) -> None:
    lines = lines_of_shipped()[:6]
    lines.append('{"t":0.5,"conn":1,"ev":"truncated","limit":900}\n')
    lines.append(lines_of_shipped()[6])
    path = tmp_path / "after.jsonl"
    path.write_text("".join(lines))
    with pytest.raises(
        RecordingError, match=r"after\.jsonl:8: a line after the 'truncated' line 7"
    ):
        read_recording(str(path))


def test_a_format_1_recording_still_reads(tmp_path: Path) -> None:
    lines = lines_of_shipped()
    lines[0] = '{"livebridge_recording":1,"audio":"length"}\n'
    path = tmp_path / "v1.jsonl"
    path.write_text("".join(lines))
    recording = read_recording(str(path))
    assert len(recording.entries) == len(lines) - 1 and recording.truncated is None
