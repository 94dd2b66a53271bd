"""``livebridge demo``: the scripted conversation end to end on each vendor, its JSON, its terminal
output."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from livebridge.cli.demo import scrape_config
from livebridge.cli.main import main
from livebridge.demo.driver import DemoRun, Exchange, Vendor, run_demo, summarize
from livebridge.demo.render import Terminal
from livebridge.emulator import TranscriptEntry, Violation
from tests.support.system_packages import require
from tests.support.timing import seconds

REPOSITORY = Path(__file__).resolve().parents[2]


VENDORS: list[Vendor] = ["gemini", "openai"]


def _gemini_summary(summary: dict[str, Any]) -> None:
    assert summary["connections"] == 2
    assert summary["transcript"]["function_calls"] == summary["calls"]
    booking = summary["turns"][1]["calls"][0]
    assert booking["behavior"] == "NON_BLOCKING" and booking["responses"] > 1
    assert any("resumed on a new connection" in n for n in summary["turns"][3]["notices"])


def _openai_summary(summary: dict[str, Any]) -> None:
    assert summary["calls"] == 8
    assert summary["connections"] == 1
    booking = summary["turns"][1]["calls"][0]  # no NON_BLOCKING on OpenAI: one answer
    assert booking["name"] == "book_table" and booking["responses"] == 1
    assert "reference JN-4821" in " ".join(summary["turns"][1]["replies"])
    barge_in = summary["turns"][2]
    assert [c["outcome"] for c in barge_in["calls"]] == ["cancelled", "ok"]
    assert barge_in["calls"][0]["responses"] == 0  # its response was cancelled: never answered


#: What each vendor's run of the same conversation shows beyond the shared contract.
SUMMARY_CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "gemini": _gemini_summary,
    "openai": _openai_summary,
}


@pytest.mark.parametrize("vendor", VENDORS)
def test_demo_json_reports_the_whole_contract_and_no_violation(
    vendor: Vendor, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["demo", "--json", "--fast", "--vendor", vendor])
    summary = json.loads(capsys.readouterr().out)

    assert code == 0
    assert summary["ok"] is True
    assert summary["violations"] == 0 and summary["lost_calls"] == 0
    assert summary["scenario_errors"] == []
    outcomes = summary["outcomes"]
    assert outcomes["error"] == 1 and outcomes["timeout"] == 1 and outcomes["cancelled"] == 1
    assert summary["calls"] == sum(outcomes.values())
    assert summary["metrics_url"].startswith("http://127.0.0.1:")
    turnaround = summary["turnaround_ms"]
    assert 0 < turnaround["p50"] <= turnaround["p95"] <= turnaround["max"]
    first = summary["turns"][0]
    assert len(first["calls"]) == 5
    assert first["serial_ms"] > first["turnaround_ms"]  # the batch ran concurrently
    SUMMARY_CHECKS[vendor](summary)


def _gemini_finals(transcript: Sequence[TranscriptEntry]) -> Counter[str]:
    """Final function responses by call id (a streamed call's partial answers aside)."""
    return Counter(
        response["id"]
        for entry in transcript
        if entry.direction == "client" and "toolResponse" in entry.message
        for response in entry.message["toolResponse"]["functionResponses"]
        if not response.get("willContinue")
    )


def _openai_finals(transcript: Sequence[TranscriptEntry]) -> Counter[str]:
    """``function_call_output`` items by call id."""
    return Counter(
        entry.message["item"]["call_id"]
        for entry in transcript
        if entry.direction == "client"
        and entry.message.get("type") == "conversation.item.create"
        and entry.message["item"].get("type") == "function_call_output"
    )


def _gemini_counts(run: DemoRun, final: Counter[str]) -> None:
    issued = [
        call["id"]
        for entry in run.transcript
        if entry.direction == "server" and "toolCall" in entry.message
        for call in entry.message["toolCall"]["functionCalls"]
    ]
    responses = [
        response
        for entry in run.transcript
        if entry.direction == "client" and "toolResponse" in entry.message
        for response in entry.message["toolResponse"]["functionResponses"]
    ]
    withdrawn = {
        call_id
        for entry in run.transcript
        if entry.direction == "server" and "toolCallCancellation" in entry.message
        for call_id in entry.message["toolCallCancellation"]["ids"]
    }
    summary = run.summary
    assert summary["calls"] == len(issued)
    assert summary["transcript"]["function_calls"] == len(issued)
    assert summary["transcript"]["function_responses"] == len(responses)
    assert summary["transcript"]["cancelled_calls"] == len(withdrawn)
    # Every call that was not withdrawn got exactly one final answer.
    assert set(final) == set(issued) - withdrawn
    assert summary["outcomes"]["cancelled"] == len(withdrawn)


def _openai_counts(run: DemoRun, final: Counter[str]) -> None:
    assert len(final) == 7
    assert run.summary["transcript"]["cancelled_calls"] == 1


#: Per vendor: the final answers on its wire, and what else its transcript must agree with.
TRANSCRIPT_CHECKS: dict[
    str,
    tuple[
        Callable[[Sequence[TranscriptEntry]], Counter[str]],
        Callable[[DemoRun, Counter[str]], None],
    ],
] = {
    "gemini": (_gemini_finals, _gemini_counts),
    "openai": (_openai_finals, _openai_counts),
}


@pytest.mark.parametrize("vendor", VENDORS)
async def test_demo_counts_match_the_emulator_transcript(vendor: Vendor) -> None:
    run = await run_demo(pace=0.2, vendor=vendor)
    finals, counts = TRANSCRIPT_CHECKS[vendor]

    final = finals(run.transcript)
    assert set(final.values()) == {1}
    assert run.summary["answered_calls"] == len(final)
    counts(run, final)
    assert [v for v in run.violations if v.severity == "error"] == []


def test_demo_terminal_output(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo", "--fast"])
    out = capsys.readouterr().out

    assert code == 0
    assert "\x1b[" not in out  # not a terminal: no colour codes
    assert "metrics   http://127.0.0.1:" in out
    assert re.search(r"a serial loop would have taken \d+ ms; answered in \d+ ms", out)
    assert "check_opening_hours  cancelled" in out
    assert "you ⚡  > Actually, never mind." in out
    assert "streamed: " in out
    assert "violations  0" in out
    assert out.rstrip().endswith("PASS: every call got exactly one answer")
    # The excerpt docs/cli.md shows is what the demo prints, timings and bars aside.
    page = (REPOSITORY / "docs" / "cli.md").read_text()
    excerpt = page[page.index("```text\nyou    >") + len("```text\n") :].split("```")[0]
    printed = {timeless(line) for line in out.splitlines()}
    shown = [line for line in excerpt.splitlines() if line != "..."]
    assert [line for line in shown if timeless(line) not in printed] == []


def timeless(line: str) -> str:
    """A demo line without what changes from run to run: times, bars, ratios."""
    line = re.sub(r"▕[^▏]*▏", "▕▏", line)
    line = re.sub(r"\d+(\.\d+)? ?(ms|s)\b", "T", line)
    line = re.sub(r"\d+(\.\d+)?x", "Nx", line)
    return re.sub(" +", " ", line).strip()


def test_a_violation_or_a_lost_call_fails_the_run() -> None:
    violation = Violation("duplicate_answer", "second answer", None, "s1")
    assert summarize([], [], [violation], [], 1)["ok"] is False
    assert summarize([], [], [], [], 1)["ok"] is True
    warning = Violation("split_batch", "split", None, "s1", "warning")
    assert summarize([], [], [warning], [], 1)["ok"] is True
    assert summarize([Exchange("hi")], [], [], ["ScenarioError: boom"], 1)["ok"] is False


def test_colour_only_when_asked() -> None:
    class Sink:
        def __init__(self) -> None:
            self.text = ""

        def write(self, text: str) -> int:
            self.text += text
            return len(text)

        def flush(self) -> None:
            pass

        def isatty(self) -> bool:
            return True

    sink = Sink()
    Terminal(sink, colour=True).user("hello")  # type: ignore[arg-type]
    assert "\x1b[1;36m" in sink.text and sink.text.endswith("> hello\n")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_readme_demo_command_works_on_a_fresh_clone(tmp_path: Path) -> None:
    readme = (REPOSITORY / "README.md").read_text()
    command = next((line for line in readme.splitlines() if line.startswith("make demo")), None)
    assert command is not None, "README.md must show the set-up-and-demo command `make demo`"
    assert shutil.which("git") and shutil.which("make")
    clone = tmp_path / "livebridge"
    subprocess.run(
        ["git", "clone", "--quiet", str(REPOSITORY), str(clone)], check=True, timeout=120
    )

    result = subprocess.run(
        ["bash", "-c", command],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=seconds(580),
        check=False,
    )

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "PASS: every call got exactly one answer" in result.stdout
    # The demo installs the package and what it needs, none of the test tools.
    installed = subprocess.run(
        [str(clone / ".venv" / "bin" / "python"), "-m", "pip", "list", "--format=freeze"],
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds(120),
    ).stdout.lower()
    assert "google-genai==" in installed
    for tool in ("mypy", "playwright", "hypothesis", "anthropic", "mkdocs"):
        assert f"{tool}==" not in installed, tool


def test_demo_exits_non_zero_when_the_emulator_finds_a_violation(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Break the client on purpose: every answer leaves without its function name, which the
    # emulator's contract checker reports (the Live service has been seen to mishandle it).
    from livebridge.vendors.gemini import answers as gemini_live

    encode = gemini_live.encode

    def nameless(*args: Any, **kwargs: Any) -> dict[str, Any]:
        response = encode(*args, **kwargs)
        response.pop("name")
        return response

    monkeypatch.setattr(gemini_live, "encode", nameless)
    code = main(["demo", "--json", "--fast"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 1
    assert summary["ok"] is False and summary["violations"] > 0
    assert {v["kind"] for v in summary["violation_details"]} == {"missing_name"}


def test_demo_json_is_one_document_on_standard_output() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "livebridge", "demo", "--json", "--fast"],
        capture_output=True,
        text=True,
        timeout=seconds(120),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1  # one line, one document
    assert json.loads(result.stdout)["ok"] is True


@pytest.mark.slow
@pytest.mark.parametrize("json_output", [False, True])
def test_hold_keeps_the_metrics_endpoint_up_until_interrupted(json_output: bool) -> None:
    command = [sys.executable, "-m", "livebridge", "demo", "--fast", "--hold"]
    demo = subprocess.Popen(
        command + (["--json"] if json_output else []),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        held = demo.stderr if json_output else demo.stdout
        assert held is not None
        lines: list[str] = []
        while not lines or "static_configs" not in lines[-1]:
            line = held.readline()
            assert line, "the demo exited before holding:\n" + "".join(lines)
            lines.append(line)
        notice = next(line for line in lines if "until Ctrl-C" in line)
        url = re.search(r"(http://127\.0\.0\.1:(\d+)/metrics)", notice)
        assert url is not None, notice
        assert f"targets: ['127.0.0.1:{url.group(2)}']" in lines[-1]
        assert "  - job_name: livebridge-demo" in "".join(lines)
        # Scraped after the conversation ended: the totals are all there.
        with urllib.request.urlopen(url.group(1), timeout=10) as response:
            text = response.read().decode()
        assert 'livebridge_tool_calls_total{behavior="BLOCKING",function="get_weather"' in text
        assert demo.poll() is None
        demo.send_signal(signal.SIGINT)
        out, err = demo.communicate(timeout=seconds(30))
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert demo.returncode == 0, err
    assert "Traceback" not in err
    if json_output:
        assert json.loads(out)["ok"] is True


def test_the_printed_scrape_config_is_one_prometheus_accepts(tmp_path: Path) -> None:
    promtool = require("promtool", "prometheus")
    config = tmp_path / "prometheus.yml"
    config.write_text(scrape_config(9464) + "\n")
    result = subprocess.run(
        [promtool, "check", "config", str(config)],
        capture_output=True,
        text=True,
        timeout=seconds(60),
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
