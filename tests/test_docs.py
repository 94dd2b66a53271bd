"""The documentation site builds from the repository, offline and without a single warning."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent


def test_the_site_builds_warning_free_with_the_api_reference(tmp_path: Path) -> None:
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    for page in ("contract", "emulator", "metrics", "deployment"):
        assert (site / page / "index.html").is_file(), page
    # The reference is generated from the docstrings, not written by hand.
    session = (site / "reference" / "session" / "index.html").read_text()
    assert "livebridge.session.LiveSession" in session
    assert "Stop input, give running calls" in session  # LiveSession.aclose's docstring
    errors = (site / "reference" / "errors" / "index.html").read_text()
    assert re.search(r"LivebridgeError", errors)
