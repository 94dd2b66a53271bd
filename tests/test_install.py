"""A new user's install: clone, `pip install` as the README says into an existing app's fresh
venv, then the README's quickstart against the emulator and the `livebridge` command."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import anyio
import pytest

from livebridge.emulator import Emulator

from .test_readme import block, offline_environment

REPOSITORY = Path(__file__).resolve().parent.parent


def install_line() -> str:
    """The README's install command for an existing project (the first of its Install block)."""
    text = (REPOSITORY / "README.md").read_text()
    section = text[text.index("\n## Install\n") :]
    match = re.search(r"^pip install (\./livebridge)\s", section, re.MULTILINE)
    assert match, "the Install section must start with `pip install ./livebridge`"
    return match.group(1)


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_pip_install_into_an_existing_app_runs_the_quickstart(tmp_path: Path) -> None:
    assert shutil.which("git"), "git is needed to clone the repository"
    await anyio.run_process(
        ["git", "clone", "--quiet", str(REPOSITORY), str(tmp_path / "livebridge")]
    )
    app = tmp_path / "app"
    app.mkdir()
    await anyio.run_process([sys.executable, "-m", "venv", str(app / ".venv")])
    python = str(app / ".venv" / "bin" / "python")
    env = offline_environment()
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    # The README's line names the clone relative to the directory it is run from.
    await anyio.run_process([*pip, install_line()], cwd=tmp_path, env=env, stdout=None)

    # The app's own code: the README's quickstart, run by the app's interpreter.
    (app / "main.py").write_text(block("Quickstart"))
    async with Emulator() as emulator:
        result = await anyio.run_process(
            [python, "main.py"], cwd=app, env=env | emulator.env(), check=False
        )
        violations = list(emulator.violations)
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()
    assert out.count("[get_weather: ok in") >= 2, out  # one per place the emulator's model reads
    assert violations == []

    # The package came from the venv, not from this checkout, and its command works.
    where = await anyio.run_process(
        [python, "-c", "import livebridge; print(livebridge.__file__)"], cwd=app, env=env
    )
    location = where.stdout.decode()
    assert str(app / ".venv") in location and str(REPOSITORY) not in location
    help_text = await anyio.run_process(
        [str(app / ".venv" / "bin" / "livebridge"), "--help"], env=env
    )
    assert "livebridge demo" in help_text.stdout.decode()
