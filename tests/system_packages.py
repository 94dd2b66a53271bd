"""Debian packages some tests drive for real (Prometheus, Chromium).

``require`` finds the program, installs its package when missing and running as root (as on
CI), and otherwise skips with the command that installs it. Under CI (``CI=true``) a program
that is still missing fails the test: CI must never pass by skipping.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

POLICY_RC = Path("/usr/sbin/policy-rc.d")


def require(program: str, package: str) -> str:
    """The path of ``program``, installing Debian's ``package`` if needed and possible."""
    found = shutil.which(program)
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        _apt_install(package)
        found = shutil.which(program)
        if found:
            return found
    message = f"{program} is missing: install it with `sudo apt-get install {package}`"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def _apt_install(package: str) -> None:
    """``apt-get install`` without starting any service the package ships."""
    created_policy = not POLICY_RC.exists()
    if created_policy:
        POLICY_RC.write_text("#!/bin/sh\nexit 101\n")  # keep apt from starting daemons
        POLICY_RC.chmod(0o755)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, timeout=600)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "--no-install-recommends", package],
            check=True,
            env=env,
            timeout=900,
        )
    finally:
        if created_policy:
            POLICY_RC.unlink()
