"""Debian packages some tests drive for real (Prometheus, Chromium, Redis, PostgreSQL).

``require`` finds the program, or skips with the command that installs it: the test suite
never changes the machine it runs on (``.ci/run`` installs these packages on CI). Under CI
(``CI=true``) a program that is still missing fails the test: CI must never pass by skipping.
"""

from __future__ import annotations

import os
import shutil

import pytest


def require(program: str, package: str) -> str:
    """The path of ``program``; a skip naming Debian's ``package`` where it is missing."""
    found = shutil.which(program)
    if found:
        return found
    message = f"{program} is missing: install it with `sudo apt-get install {package}`"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)
