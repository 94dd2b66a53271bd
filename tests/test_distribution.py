"""What a reviewer checks before adopting a package: its name on an index, its licence, its version,
and a wheel and sdist that an index would accept."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

import livebridge
from tests.support.timing import seconds

REPOSITORY = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]
# A requirement a user would type: `livebridge`, `livebridge[...]` or `livebridge==…`, bare (not a
# path such as ./livebridge and not the distribution's own name, livebridge-voice).
BARE_NAME = re.compile(r"""(?<![\w./-])["']?livebridge(?![\w-])(?:\[[^\]]*\])?(?=["'\s=<>~@]|$)""")


def _install_lines() -> list[tuple[str, str]]:
    """Every `pip install …` the README, the docs, the examples and the package's own messages
    show, with its file."""
    found = []
    pages = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").rglob("*.md"))]
    pages += sorted((REPOSITORY / "examples").rglob("*.md"))
    pages += sorted((REPOSITORY / "examples").rglob("*.py"))
    pages += sorted((REPOSITORY / "livebridge").rglob("*.py"))
    for page in pages:
        for line in page.read_text().splitlines():
            for match in re.finditer(r"pip install ([^`\n#]+)", line):
                found.append((page.name, match.group(1)))
    return found


def test_no_page_tells_users_to_install_the_bare_name() -> None:
    # PyPI's `livebridge` is another project that also imports as `livebridge`.
    lines = _install_lines()
    assert lines, "the pages show how to install"
    assert any(page == "redis.py" for page, _ in lines), "the messages are read too"
    for page, command in lines:
        assert not BARE_NAME.search(command), f"{page}: `pip install {command}` installs a stranger"


def test_the_bare_name_pattern_tells_a_path_from_a_requirement() -> None:
    assert BARE_NAME.search("'livebridge[phone]'")
    assert BARE_NAME.search("livebridge")
    assert BARE_NAME.search('"livebridge[otel] @ git+URL"')
    assert not BARE_NAME.search("./livebridge")
    assert not BARE_NAME.search('"./livebridge[openai]"')
    assert not BARE_NAME.search('"livebridge-voice[otel] @ git+URL"')


def test_the_distribution_has_its_own_name_version_and_licence() -> None:
    assert PROJECT["name"] == "livebridge-voice"
    assert PROJECT["version"] == livebridge.__version__
    assert PROJECT["license"] == "Apache-2.0"
    assert "Apache License" in (REPOSITORY / "LICENSE").read_text()
    changelog = (REPOSITORY / "CHANGELOG.md").read_text()
    assert f"## [{livebridge.__version__}]" in changelog, "the release has its changelog entry"


@pytest.mark.slow
def test_the_wheel_and_sdist_ship_the_licence_and_pass_twine(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(tmp_path), str(REPOSITORY)],
        check=True,
        capture_output=True,
        timeout=seconds(300),
    )
    wheel = next(tmp_path.glob("livebridge_voice-*.whl"))
    sdist = next(tmp_path.glob("livebridge_voice-*.tar.gz"))
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)],
        capture_output=True,
        text=True,
        timeout=seconds(120),
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = archive.read(metadata).decode()
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "License-Expression: Apache-2.0" in meta
    assert f"Version: {livebridge.__version__}" in meta
    with tarfile.open(sdist) as archive:
        assert any(n.endswith("/LICENSE") for n in archive.getnames())
        assert any(n.endswith("/CHANGELOG.md") for n in archive.getnames())
