"""The shipped recording, mutated at random (a field's type or number, a missing field, deep
nesting, a huge string, lines dropped, doubled or swapped): reading it is entries or one
``RecordingError`` line, and ``livebridge replay`` ends in moments with a report (exit 0 or 1)
or one line and exit 2; never a traceback, another exit status or a hang."""

from __future__ import annotations

import contextlib
import io
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from livebridge import RecordingError
from livebridge.cli.main import main
from livebridge.emulator.gemini.replay import ReplayScenario
from livebridge.recording.read import read_recording
from tests.support.hypothesis_profiles import examples
from tests.support.timing import seconds

SHIPPED = Path(__file__).parent.parent / "data" / "demo_recording.jsonl"
LINES: list[dict[str, Any]] = [json.loads(line) for line in SHIPPED.read_text().splitlines()]
#: Lines replay reads more than it forwards: the header, open, close, tool calls and answers...
STRUCTURAL = [
    n
    for n, line in enumerate(LINES)
    if n == 0
    or line["ev"] in ("open", "close")
    or not {"serverContent", "realtimeInput"} & set(line.get("msg", {}))
]
#: Tokens JSON allows that Python's json does not write: numbers out of a float's range, and
#: (not JSON at all, but hand-edited files hold them) NaN and Infinity; and deep nesting.
RAW = {
    "@huge@": "1e400",
    "@-huge@": "-1e400",
    "@nan@": "NaN",
    "@inf@": "Infinity",
    "@deep70@": "[" * 70 + "]" * 70,
    "@deep5000@": "[" * 5000 + "]" * 5000,
}
ODD = [
    None,
    True,
    False,
    0,
    -1,
    2**63,
    -(2**63) - 1,
    10**30,
    1e300,
    -1e300,
    5e-324,
    0.5,
    "",
    "x",
    "é\u0000\U0001f600",
    "x" * 2_000_000,
    *RAW,
]
odd_values = st.one_of(
    st.sampled_from(ODD),
    st.sampled_from([[], {}, {"a": {}}, [[]]]).map(lambda empty: json.loads(json.dumps(empty))),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)


def paths(value: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Every place in ``value`` (the root excluded) a mutation can reach."""
    found: list[tuple[str | int, ...]] = []
    children: list[tuple[str | int, Any]] = []
    if isinstance(value, dict):
        children = list(value.items())
    elif isinstance(value, list):
        children = list(enumerate(value))
    for key, child in children:
        found.append((*path, key))
        found += paths(child, (*path, key))
    return found


def mutate_value(data: st.DataObject, line: dict[str, Any]) -> None:
    where = data.draw(st.sampled_from(paths(line)))
    parent: Any = line
    for key in where[:-1]:
        parent = parent[key]
    if isinstance(parent, dict) and data.draw(st.booleans()):
        del parent[where[-1]]  # a missing field
    else:
        parent[where[-1]] = data.draw(odd_values)


def mutated(data: st.DataObject, path: Path) -> Path:
    """The shipped recording with one to three mutations, written to ``path``."""
    lines = json.loads(json.dumps(LINES))
    for _ in range(data.draw(st.integers(1, 3))):
        kind = data.draw(st.sampled_from(["value", "value", "value", "drop", "double", "swap"]))
        index = data.draw(st.one_of(st.sampled_from(STRUCTURAL), st.integers(0, len(lines) - 1)))
        index = min(index, len(lines) - 1)
        if kind == "value":
            mutate_value(data, lines[index])
        elif kind == "drop":
            del lines[index]
        elif kind == "double":
            lines.insert(index, json.loads(json.dumps(lines[index])))
        else:
            other = data.draw(st.integers(0, len(lines) - 1))
            lines[index], lines[other] = lines[other], lines[index]
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    for token, raw in RAW.items():
        text = text.replace(json.dumps(token), raw)
    path.write_text(text, encoding="utf-8")
    return path


def one_line(message: str) -> None:
    assert "\n" not in message.strip(), message
    assert "Traceback" not in message, message


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_reading_a_mutated_recording_is_entries_or_one_line(
    data: st.DataObject, tmp_path_factory: Any
) -> None:
    path = mutated(data, tmp_path_factory.mktemp("fuzz") / "mutated.jsonl")
    started = time.monotonic()
    try:
        recording = read_recording(path)
    except RecordingError as exc:
        one_line(str(exc))
        assert str(exc).startswith(str(path)), exc
    else:
        ReplayScenario(recording)  # what the replay reads before it plays
    assert time.monotonic() - started < seconds(10)


def replay_command(path: Path, *args: str) -> tuple[int, str, str]:
    """``livebridge replay PATH tests.support.replay_tools:registry ARGS``: its status, out and err;
    ``AssertionError`` if it does not end within a minute."""
    out, err = io.StringIO(), io.StringIO()
    ended: list[int | BaseException] = []

    def run() -> None:
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                ended.append(
                    main(["replay", str(path), "tests.support.replay_tools:registry", *args])
                )
        except BaseException as exc:  # reported below, with what was written
            ended.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert ended, f"no end within 60 s; so far: {err.getvalue()[-2000:]}"
    if isinstance(ended[0], BaseException):
        raise AssertionError(f"the command raised: {ended[0]!r}\n{err.getvalue()}") from ended[0]
    return ended[0], out.getvalue(), err.getvalue()


@pytest.mark.slow
@pytest.mark.timeout(600)  # an example whose answers all went missing waits for each
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_replaying_a_mutated_recording_is_a_report_or_one_line(
    data: st.DataObject, tmp_path_factory: Any
) -> None:
    """At ``--pace fast``: at ``recorded`` a mutated ``t`` is a real wait (up to ``MAX_GAP`` a
    line), which ``test_record_read`` bounds on its own."""
    path = mutated(data, tmp_path_factory.mktemp("fuzz") / "mutated.jsonl")
    status, out, err = replay_command(path, "--pace", "fast", "--answer-timeout", "1")
    assert "Traceback" not in out + err, err
    if status == 2:
        assert out == "", out
        one_line(err)
        assert err.startswith("livebridge replay: "), err
    else:
        assert status in (0, 1), (status, err)
        assert out.startswith(f"{path}: "), out
        for line in err.splitlines():  # the app's tool errors, one line each
            assert line.startswith("livebridge replay: "), err
