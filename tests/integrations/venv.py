"""One pinned virtual environment per framework integration, built once and reused.

Each framework (the OpenAI Agents SDK, Pipecat, LiveKit Agents) pulls in a large dependency tree
that the main test environment does without: its integration tests run in an environment of
their own, under ``${XDG_CACHE_HOME:-~/.cache}/livebridge/frameworks/<name>-<pin>-<digest>``,
outside the repository. The digest covers the pinned requirements and livebridge's own
dependencies, so a change to either builds a new environment. livebridge itself is not installed
there: the tests run with the checkout first on ``PYTHONPATH``, so one environment serves every
clone.

``python -m tests.integrations.venv NAME`` builds (or finds) one and prints its interpreter.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Each framework's pinned requirements, beside what its tests need.
FRAMEWORKS: dict[str, tuple[str, ...]] = {
    "openai-agents": ("openai-agents==0.24.0",),
    "pipecat": ("pipecat-ai[openai]==1.14.0",),
    "livekit": ("livekit-agents==1.8.9", "livekit-plugins-openai==1.8.9"),
}
TEST_REQUIREMENTS = ("pytest>=8", "pytest-asyncio>=0.24", "pytest-timeout>=2.3")


class BuildError(Exception):
    """The environment could not be built (its pip output is the message)."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "livebridge" / "frameworks"


def requirements(name: str) -> list[str]:
    """What the environment holds: the framework, livebridge's dependencies, pytest."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [*FRAMEWORKS[name], *project["dependencies"], *TEST_REQUIREMENTS]


def location(name: str) -> Path:
    wanted = "\n".join([sys.version.split()[0], *requirements(name)])
    digest = hashlib.sha256(wanted.encode()).hexdigest()[:10]
    pin = FRAMEWORKS[name][0].partition("==")[2] or "any"
    return cache_root() / f"{name}-{pin}-{digest}"


def ensure(name: str) -> tuple[Path, float]:
    """The environment's interpreter, and the seconds spent building it (0.0 when reused).

    Builds under a file lock (parallel test workers wait for one build) and marks the
    environment complete only at the end, so a build cut short is redone, never used.
    """
    home = location(name)
    python = home / "bin" / "python"
    done = home / ".complete"
    if done.exists():
        return python, 0.0
    home.parent.mkdir(parents=True, exist_ok=True)
    with open(home.parent / f".{home.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return python, 0.0
        started = time.monotonic()
        shutil.rmtree(home, ignore_errors=True)
        steps = [
            [sys.executable, "-m", "venv", str(home)],
            [str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
            [str(python), "-m", "pip", "install", "--quiet", *requirements(name)],
        ]
        for step in steps:
            ran = subprocess.run(step, capture_output=True, text=True, check=False)
            if ran.returncode:
                shutil.rmtree(home, ignore_errors=True)
                output = (ran.stdout + ran.stderr).strip()[-4000:]
                raise BuildError(
                    f"building the {name} environment failed: {' '.join(step)}\n{output}"
                )
        done.write_text(f"{time.monotonic() - started:.1f}\n")
        return python, time.monotonic() - started


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in FRAMEWORKS:
        print(
            f"usage: python -m tests.integrations.venv {{{','.join(FRAMEWORKS)}}}", file=sys.stderr
        )
        return 2
    try:
        python, took = ensure(argv[0])
    except BuildError as exc:
        print(str(exc).splitlines()[0], file=sys.stderr)
        return 2
    print(python, f"(built in {took:.0f} s)" if took else "(reused)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
