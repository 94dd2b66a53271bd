"""The framework environments: a failed build fails the checks under CI, never skips them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integrations import framework, venv


@pytest.mark.slow
def test_a_failed_build_skips_here_and_fails_under_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    # A requirement nothing can satisfy, and no index to look in: the build fails at once.
    monkeypatch.setitem(venv.FRAMEWORKS, "broken", ("pip>=9999",))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="could not be built"):
        framework.run_checks("broken", "tests/integrations/check_pipecat.py")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="required under CI"):
        framework.run_checks("broken", "tests/integrations/check_pipecat.py")
    assert not venv.location("broken").exists()  # nothing half-built is left to be reused


def test_the_command_names_the_frameworks() -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "tests.integrations.venv", "nothing"],
        cwd=venv.ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 2 and "openai-agents" in ran.stderr and "pipecat" in ran.stderr
