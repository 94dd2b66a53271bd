"""Reading recordings that are huge, bombs or hand-edited: bounded memory, one-line errors,
exit 2 from the command, and a recorded pace that no timestamp can stall."""

from __future__ import annotations

import gzip
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from livebridge import RecordingError
from livebridge.cli.main import main
from livebridge.emulator.gemini import replay as emulator_replay
from livebridge.recording.read import MAX_LINE_BYTES
from livebridge.recording.record import read_recording
from livebridge.recording.replay import replay
from tests.replay_tools import a_recording, answer, demo_tools, tool_call

SHIPPED = Path(__file__).parent.parent / "data" / "demo_recording.jsonl"
REPOSITORY = Path(__file__).resolve().parents[2]
#: Peak RSS (MiB) of a child that imports the reader, then (optionally) reads one file.
MEASURE = """
import resource, sys
from livebridge.recording.record import read_recording
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
        timeout=120,
        check=True,
    )
    return int(done.stdout.split()[-1])


def big_recording(path: Path, size: int) -> Path:
    header, *body = SHIPPED.read_text().splitlines(keepends=True)
    chunk = "".join(body)
    with open(path, "w") as file:
        file.write(header)
        for _ in range(size // len(chunk) + 1):
            file.write(chunk)
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
    ],
)
def test_a_field_of_the_wrong_type_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, expected: str
) -> None:
    lines = SHIPPED.read_text().splitlines(keepends=True)
    lines[6] = line + "\n"
    path = tmp_path / "edited.jsonl"
    path.write_text("".join(lines))
    assert main(["replay", str(path), "tests.replay_tools:registry"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"livebridge replay: {path}{expected}"), err
    assert err.count("\n") == 1 and "Traceback" not in err


async def test_a_huge_gap_at_the_recorded_pace_is_played_as_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``t=1e300`` held ``--pace recorded`` until the replay's deadline (300 s)."""
    monkeypatch.setattr(emulator_replay, "MAX_GAP", 0.2)
    path = a_recording(
        tmp_path,
        tool_call("c1"),
        answer("c1"),
        {"t": 1e300, "ev": "recv", "msg": {"serverContent": {"turnComplete": True}}},
    )
    started = time.monotonic()
    with anyio.fail_after(60):
        report = await replay(path, demo_tools(), pace="recorded")
    assert time.monotonic() - started < 30
    assert report.answers == 1, report.render()
