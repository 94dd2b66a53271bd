"""The documentation site builds from the repository, offline and without a single warning."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from livebridge.emulator import Conversation, Emulator
from tests.support.timing import seconds

from .test_readme import inside_main, offline_environment, python_blocks, run_python

REPOSITORY = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_site_builds_warning_free_with_the_api_reference(tmp_path: Path) -> None:
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=seconds(300),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    for page in ("contract", "emulator", "metrics", "deployment"):
        assert (site / page / "index.html").is_file(), page
    # The reference is generated from the docstrings, not written by hand.
    session = (site / "reference" / "session" / "index.html").read_text()
    assert "livebridge.live.session.LiveSession" in session
    assert "Stop input, give running calls" in session  # LiveSession.aclose's docstring
    errors = (site / "reference" / "errors" / "index.html").read_text()
    assert re.search(r"LivebridgeError", errors)
    # Code blocks are highlighted at build time, with no script from the network.
    overview = (site / "index.html").read_text()
    assert '<div class="codehilite">' in overview and '<span class="kn">import</span>' in overview
    assert "cdnjs" not in overview


async def test_the_overview_program_runs_against_the_emulator(tmp_path: Path) -> None:
    (program,) = [b.code for b in python_blocks((REPOSITORY / "docs" / "index.md").read_text())]
    async with Emulator() as emulator:  # serves from its own thread: the run may block
        out = run_python(program, offline_environment(**emulator.env()), tmp_path)
        assert emulator.violations == []
    assert out.count("[get_weather: ok]") == 2 and "Paris: " in out


def test_the_models_page_programs_run(tmp_path: Path) -> None:
    """The override and the table dump on docs/models.md run as shown."""
    override, table = [
        b.code for b in python_blocks((REPOSITORY / "docs" / "models.md").read_text())
    ]
    out = run_python(override, offline_environment(), tmp_path)
    assert out.strip() == "NON_BLOCKING"
    out = run_python(table, offline_environment(), tmp_path)
    assert "gemini-3.8-live" in out and "ids=False" in out and "undeclared=NON_BLOCKING" in out


async def test_the_phone_page_program_runs_against_the_emulator(tmp_path: Path) -> None:
    """docs/phone.md's server answers its simulated caller, offline."""
    (program,) = [b.code for b in python_blocks((REPOSITORY / "docs" / "phone.md").read_text())]
    async with Emulator() as emulator:
        out = run_python(program, offline_environment(**emulator.env()), tmp_path)
        assert emulator.violations == []
    assert "call from +15550100" in out
    assert "DtmfPressed(digit='1')" in out
    assert "CallEnded(reason='caller_hung_up'" in out
    heard = float(out.split("the caller heard ")[1].split()[0])
    assert heard >= 0.3


async def test_the_session_end_fragment_catches_the_end(tmp_path: Path) -> None:
    """docs/configuration.md's ``SessionEndedError`` fragment, run against a service that closes
    the session mid-conversation: the ``except`` runs and the events after it end with Closed."""
    (fragment,) = [
        b.code
        for b in python_blocks((REPOSITORY / "docs" / "configuration.md").read_text())
        if b.section == "When the session ends"
    ]
    prelude = (
        "import logging, sys\nfrom google import genai\nimport livebridge\n"
        "logging.basicConfig(stream=sys.stdout, format='%(message)s')\n"
        "log = logging.getLogger('app')\nMODEL = 'gemini-3.8-live'\n"
        "tools = livebridge.ToolRegistry()\nclient = genai.Client()\n"
        "async def converse(session):\n"
        "    await session.send_text('hello')\n"
        "    await anyio.sleep(60)\n"
        "    print('never here')\n"
    )
    fragment = fragment.replace("    ...", "    print(type(event).__name__)")

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.close(1000, "")

    async with Emulator(scenario) as emulator:
        out = run_python(
            inside_main(fragment, prelude), offline_environment(**emulator.env()), tmp_path
        )
    assert "the conversation ended: " in out and "never here" not in out
    assert out.strip().splitlines()[-1] == "Closed"


def test_the_frameworks_page_program_runs(tmp_path: Path) -> None:
    """docs/integrations.md: a twin in one turn, and a lost answer served to its re-issue."""
    (program,) = [
        b.code for b in python_blocks((REPOSITORY / "docs" / "integrations.md").read_text())
    ]
    out = run_python(program, offline_environment(), tmp_path)
    assert out.split() == ["ok", "duplicate", "duplicate", "c1"]
