"""Every example runs as its docstring shows, offline (against the emulator where it needs one)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.timing import seconds

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
OFFLINE = {
    k: v
    for k, v in os.environ.items()
    if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL")
}


def run_example(name: str) -> str:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        env=OFFLINE,
        capture_output=True,
        text=True,
        timeout=seconds(90),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


@pytest.mark.parametrize("name", ["embedded.py", "generate_content.py", "metrics.py"])
def test_the_docstring_shows_how_to_run_it(name: str) -> None:
    assert f"python examples/{name}" in (EXAMPLES / name).read_text()


def test_embedded_answers_a_question_with_two_parallel_calls() -> None:
    out = run_example("embedded.py")
    assert out.count("[get_weather: ok in") == 2
    assert "Paris: " in out and "Tokyo: " in out


def test_generate_content_answers_three_vendors_turns() -> None:
    out = run_example("generate_content.py")
    assert '"id": "g1"' in out and '"id": "g2"' in out and '"city": "Tokyo"' in out
    assert "no traffic feed for Paris" in out
    assert '"tool_call_id": "call_2"' in out
    assert '"tool_use_id": "toolu_2"' in out and '"is_error": true' in out


def test_metrics_prints_the_lines_it_scraped() -> None:
    out = run_example("metrics.py")
    assert out.startswith("scrape endpoint: http://127.0.0.1:")
    assert (
        'livebridge_tool_calls_total{behavior="BLOCKING",function="get_weather",outcome="ok"} 3.0'
        in out
    )
    assert "livebridge_sessions_active 1.0" in out
