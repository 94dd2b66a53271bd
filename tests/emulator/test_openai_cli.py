"""``livebridge emulator --protocol openai``: what only the OpenAI side refuses (the run itself
is tested for both vendors in ``test_cli.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from livebridge.cli.main import main


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--vendor", "openai", "--reissue-after", "1"],
            "--reissue-after: Gemini Live only, not --vendor openai",
        ),
        (
            ["--protocol", "openai", "--no-audio-check", "--held-answers", "off"],
            "--no-audio-check: Gemini Live only, not --vendor openai",
        ),
        (["--auto-response"], "--auto-response: OpenAI Realtime only; add --vendor openai"),
    ],
)
def test_flags_of_the_other_protocol_are_one_line_errors(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["emulator", *flags]) == 2
    assert capsys.readouterr().err == f"livebridge emulator: {message}\n"


def test_a_gemini_only_step_is_refused_when_loaded_for_openai(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "steps.json"
    scenario.write_text(json.dumps([{"expect_turn": {}}, {"go_away": "1s"}]))
    assert main(["emulator", "--protocol", "openai", "--scenario", str(scenario)]) == 2
    err = capsys.readouterr().err
    assert "step 1: 'go_away' is not a step of the openai protocol" in err
    assert err.count("\n") == 1
