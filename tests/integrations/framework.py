"""Run one framework's checks in its own environment, from the main test run.

The environment is built on first use. A build that fails (no network) skips the checks on a
developer's machine, and fails them under CI (``CI=true``): CI never passes without them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.integrations import venv
from tests.support.timing import seconds


def run_checks(name: str, path: str, *options: str) -> None:
    """Run the checks at ``path`` in ``name``'s environment (``options`` go to pytest)."""
    try:
        python, took = venv.ensure(name)
    except venv.BuildError as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"the {name} environment is required under CI: {exc}", pytrace=False)
        pytest.skip(f"the {name} environment could not be built: {str(exc).splitlines()[0]}")
    if took:
        print(f"built the {name} environment in {took:.0f} s", file=sys.stderr)
    environment = {**os.environ, "PYTHONPATH": str(venv.ROOT)}
    # --noconftest: the framework's environment has none of the suite's own tools (Hypothesis,
    # psycopg, ...) that tests/conftest.py brings in.
    command = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--noconftest"]
    command += ["-o", "python_files=check_*.py", *options, path]
    ran = subprocess.run(
        command,
        cwd=venv.ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=seconds(300),
        check=False,
    )
    assert ran.returncode == 0, f"{name} checks failed:\n{ran.stdout[-8000:]}\n{ran.stderr[-4000:]}"
    assert " passed" in ran.stdout, ran.stdout


def docs_program(page: str) -> str:
    """The one ```python block of ``docs/<page>`` (run by the checks in the framework's
    environment, where ``tests.test_readme`` and its imports are not installed)."""
    text = (venv.ROOT / "docs" / page).read_text()
    blocks: list[str] = re.findall(r"^```python\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE)
    (block,) = blocks
    return block
