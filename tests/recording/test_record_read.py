"""Reading recordings that are huge, bombs or hand-edited: bounded memory and work, one-line
errors, exit 2 from the command, and a recorded pace that no timestamp can stall."""

from __future__ import annotations

import contextlib
import gzip
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from livebridge import RecordingError
from livebridge.cli.main import main
from livebridge.emulator import replaying
from livebridge.recording.read import (
    MAX_BLANK_LINES,
    MAX_LINE_BYTES,
    MAX_RATIO,
    RATIO_FLOOR,
    read_recording,
)
from livebridge.recording.replay import replay
from tests.cli.test_cli_errors import one_line_failure
from tests.recording.test_replay_cli import livebridge_replay
from tests.support.replay_tools import a_recording, answer, demo_tools, tool_call
from tests.support.timing import seconds

SHIPPED = Path(__file__).parent.parent / "data" / "demo_recording.jsonl"
REPOSITORY = Path(__file__).resolve().parents[2]
#: Peak RSS (MiB) of a child that imports the reader, then (optionally) reads one file.
MEASURE = """
import resource, sys
from livebridge.recording.read import read_recording
if len(sys.argv) > 1:
    print(len(read_recording(sys.argv[1]).entries))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


def peak_mib(*args: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, *args],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=seconds(120),
        check=True,
    )
    return int(done.stdout.split()[-1])


def big_recording(path: Path, size: int) -> Path:
    """The shipped recording's entries over and over, each time later (``t`` never goes back)."""
    header, *body = SHIPPED.read_text().splitlines(keepends=True)
    entries = [json.loads(line) for line in body]
    span = entries[-1]["t"]
    with open(path, "w") as file:
        file.write(header)
        for n in range(size // sum(map(len, body)) + 1):
            for entry in entries:
                file.write(json.dumps({**entry, "t": round(entry["t"] + n * span, 6)}) + "\n")
    return path


def test_a_large_recording_is_held_at_about_its_own_size(tmp_path: Path) -> None:
    """Decoded, each line's objects took ten times its bytes (100 MB: +1.2 GB)."""
    path = big_recording(tmp_path / "big.jsonl", 30 * 1024 * 1024)
    size_mib = path.stat().st_size // (1024 * 1024)
    grew = peak_mib(str(path)) - peak_mib()
    assert grew < 3 * size_mib, f"{grew} MiB to read {size_mib} MiB"


def test_a_gzip_bomb_stops_at_the_line_bound(tmp_path: Path) -> None:
    path = tmp_path / "bomb.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=9) as file:
        file.write(b'{"livebridge_recording":2}\n')
        for _ in range(64):  # 64 MiB of one line, in 64 KB of file
            file.write(bytes(1024 * 1024))
    assert path.stat().st_size < 200_000
    with pytest.raises(RecordingError, match=f":2: a line longer than {MAX_LINE_BYTES} bytes"):
        read_recording(path)


def test_a_file_larger_than_the_read_bound_stops_there(tmp_path: Path) -> None:
    path = tmp_path / "many.jsonl.gz"
    line = b'{"t":0.1,"conn":1,"ev":"malformed","error":"x"}\n'
    with gzip.open(path, "wb") as file:
        file.write(b'{"livebridge_recording":2}\n' + line * 100_000)
    with pytest.raises(RecordingError, match=r"more than 1000000 bytes \(decompressed\)"):
        read_recording(path, max_bytes=1_000_000)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            '{"t":1,"conn":1,"ev":"recv","msg":{"toolCall":{"functionCalls":"x"}}}',
            ":7: msg.toolCall.functionCalls: expected array | null, got str",
        ),
        (
            '{"t":1,"conn":1,"ev":"recv","msg":{"toolCallCancellation":{"ids":[{"a":1}]}}}',
            ":7: msg.toolCallCancellation.ids[0]: expected str, got object",
        ),
        (
            '{"t":1,"conn":1,"ev":"recv","msg":{"goAway":"soon"}}',
            ":7: msg.goAway: expected object | null, got str",
        ),
        (
            '{"t":1,"conn":1,"ev":"send","msg":{"toolResponse":{"functionResponses":[3]}}}',
            ":7: msg.toolResponse.functionResponses[0]: expected object, got int",
        ),
        (
            '{"t":1,"conn":1,"ev":"close","by":"server","code":"1000"}',
            ":7: code: expected int | null, got str",
        ),
        ('{"t":1,"conn":1,"ev":"open","handle":7}', ":7: handle: expected str | null, got int"),
        ('{"t":-1,"conn":1,"ev":"open"}', ":7: 't' must be a finite number >= 0"),
        ('{"t":1,"conn":1,"ev":"recv","msg":{"a":{"dataBytes":1e12}}}', ":7: 'dataBytes' must"),
        (
            '{"t":0.1,"conn":1,"ev":"recv","msg":{"toolCall":{"functionCalls":[{"name":"f",'
            '"args":[1]}]}}}',
            ":7: msg.toolCall.functionCalls[0].args: expected object | null, got array",
        ),
        (
            '{"t":0.1,"conn":1,"ev":"send","msg":{"toolResponse":{"functionResponses":[{"id":"a",'
            '"name":"f","response":"ok"}]}}}',
            ":7: msg.toolResponse.functionResponses[0].response: expected object | null, got str",
        ),
        (
            '{"t":0.1,"conn":1,"ev":"recv","msg":{"toolCall":{"functionCalls":[{"id":"a"}]}}}',
            ":7: msg.toolCall.functionCalls[0]: object missing required field name",
        ),
        ('{"t":0.1,"conn":1,"ev":"malformed","error":[]}', ":7: error: expected str, got array"),
        ('{"t":0.01,"conn":1,"ev":"open"}', ":7: 't' goes back in time (0.01 after 0.086896)"),
        ('{"t":901,"conn":1,"ev":"open"}', ":7: 't' jumps 900.9"),
        ('{"t":1e400,"conn":1,"ev":"open"}', ":7: not valid JSON: Number out of range"),
        ('{"t":0.1,"conn":0,"ev":"open"}', ":7: 'conn' counts from 1, not 0"),
        (
            '{"t":0.1,"conn":1,"ev":"recv","msg":{"a":' + "[" * 100 + "]" * 100 + "}}",
            ":7: nested deeper than 64 objects and arrays",
        ),
        (
            '{"t":0.1,"conn":1,"ev":"recv","msg":{"a":' + "[" * 100_000 + "]" * 100_000 + "}}",
            ":7: nested deeper than 64 objects and arrays",
        ),
    ],
)
def test_a_field_of_the_wrong_type_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, expected: str
) -> None:
    lines = SHIPPED.read_text().splitlines(keepends=True)
    lines[6] = line + "\n"
    path = tmp_path / "edited.jsonl"
    path.write_text("".join(lines))
    assert main(["replay", str(path), "tests.support.replay_tools:registry"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"livebridge replay: {path}{expected}"), err
    assert err.count("\n") == 1 and "Traceback" not in err


async def test_a_long_gap_at_the_recorded_pace_is_played_as_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ten-minute silence (within MAX_RECORDED_GAP) is played as MAX_GAP."""
    monkeypatch.setattr(replaying, "MAX_GAP", 0.2)
    path = a_recording(
        tmp_path,
        tool_call("c1"),
        answer("c1"),
        {"t": 600.0, "ev": "recv", "msg": {"serverContent": {"turnComplete": True}}},
    )
    started = time.monotonic()
    with anyio.fail_after(seconds(60)):
        report = await replay(path, demo_tools(), pace="recorded")
    assert time.monotonic() - started < seconds(30)
    assert report.answers == 1, report.render()


def call_line(t: float, call_id: object = "c1", name: object = "get_time") -> dict[str, Any]:
    call = {"id": call_id, "name": name, "args": {"city": "Oslo"}}
    return {"t": t, "ev": "recv", "msg": {"toolCall": {"functionCalls": [call]}}}


def answer_line(t: float, call_id: object = "c1", name: object = "get_time") -> dict[str, Any]:
    response = {"id": call_id, "name": name, "response": {"output": {}}}
    return {"t": t, "ev": "send", "msg": {"toolResponse": {"functionResponses": [response]}}}


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        # t=1e300 held --pace recorded for MAX_GAP (30 s) per line before, exit 0
        ((call_line(1e300), answer_line(1e300)), ":3: 't' jumps 1e+300 s after the line"),
        ((call_line(0.1, call_id=7), answer_line(0.2, call_id=7)), "functionCalls[0].id: "),
        ((call_line(0.1, name=7), answer_line(0.2, name=7)), "functionCalls[0].name: "),
        ((call_line(0.1), answer_line(0.2, call_id=7)), "functionResponses[0].id: "),
    ],
    ids=["t=1e300", "int-id", "int-name", "int-answer-id"],
)
def test_a_hand_edited_recording_is_one_line_and_exit_2_by_the_command(
    tmp_path: Path, entries: tuple[dict[str, Any], ...], expected: str
) -> None:
    path = a_recording(tmp_path, *entries)
    started = time.monotonic()
    result = livebridge_replay(
        str(path), "tests.support.replay_tools:registry", "--pace", "recorded"
    )
    took = time.monotonic() - started
    one_line_failure(result, f"livebridge replay: {path}", expected)
    assert took < seconds(25), f"{took:.1f} s to refuse it"


def gzip_members(path: Path, header: bytes, member: bytes, times: int) -> Path:
    """A gzip file of ``header`` then ``member`` decompressed ``times`` times (gzip members
    concatenate), made in a fraction of the time compressing the whole would take."""
    with open(path, "wb") as file:
        file.write(gzip.compress(header))
        packed = gzip.compress(member, compresslevel=9)
        for _ in range(times):
            file.write(packed)
    return path


def test_a_gzip_of_blank_lines_is_refused_in_moments_by_the_command(tmp_path: Path) -> None:
    """2 GiB of blank lines in 2 MB of gzip took minutes to read within the memory bound."""
    path = gzip_members(
        tmp_path / "blank.jsonl.gz",
        b'{"livebridge_recording":2}\n',
        b"\n" * (64 * 1024 * 1024),
        32,
    )
    assert path.stat().st_size < 3_000_000
    started = time.monotonic()
    result = livebridge_replay(str(path), "tests.support.replay_tools:registry")
    took = time.monotonic() - started
    one_line_failure(result, f"{path}:{MAX_BLANK_LINES + 2}: more than {MAX_BLANK_LINES} blank")
    assert took < seconds(25), f"{took:.1f} s to refuse it"


@pytest.mark.parametrize(
    "member",
    [
        b" " * (1024 * 1024 - 1) + b"\n",  # lines of spaces: blank, but few and long
        b'{"t":0.5,"conn":1,"ev":"malformed","error":"x"}\n' * 20_000,  # entries, repeated
    ],
    ids=["spaces", "entries"],
)
def test_a_gzip_bomb_stops_at_the_ratio_bound(tmp_path: Path, member: bytes) -> None:
    header = b'{"livebridge_recording":2}\n'
    path = gzip_members(tmp_path / "bomb.jsonl.gz", header, member, 64)
    started = time.monotonic()
    with pytest.raises(RecordingError, match=f"over the {MAX_RATIO}:1 a recording compresses"):
        read_recording(path)
    assert time.monotonic() - started < seconds(10)
    # the same bytes uncompressed are read (up to the other bounds): no ratio to judge
    plain = tmp_path / "bomb.jsonl"
    with gzip.open(path, "rb") as packed, open(plain, "wb") as out:
        out.write(packed.read(RATIO_FLOOR * 2))
    with contextlib.suppress(RecordingError):  # cut mid-line or too many blanks, but not ratio
        read_recording(plain)


def test_a_recording_of_more_lines_than_the_bound_stops_there(tmp_path: Path) -> None:
    path = a_recording(tmp_path, *[tool_call(f"c{n}") for n in range(20)])
    with pytest.raises(RecordingError, match=r"hand.jsonl:11: more than 10 lines"):
        read_recording(path, max_lines=10)
    assert len(read_recording(path, max_lines=100).entries) == 22


def test_a_long_recording_compressing_under_the_ratio_reads(tmp_path: Path) -> None:
    """Reduced audio compresses about 35:1: a long recording of it is not a bomb."""
    path = tmp_path / "long.jsonl.gz"
    with gzip.open(path, "wt") as file:
        file.write('{"livebridge_recording":2,"audio":"length"}\n')
        for n in range(60_000):  # 8 MiB: past RATIO_FLOOR
            blob = {"inlineData": {"mimeType": "audio/pcm;rate=24000", "dataBytes": 1920}}
            msg = {"serverContent": {"modelTurn": {"parts": [blob], "role": "model"}}}
            file.write(json.dumps({"t": n * 0.04, "conn": 1, "ev": "recv", "msg": msg}) + "\n")
    assert len(read_recording(path).entries) == 60_000
