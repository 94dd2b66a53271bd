"""Every mistake on the command line is one line on standard error and exit status 2."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.timing import seconds

REPOSITORY = Path(__file__).resolve().parents[2]
OFFLINE = {
    k: v
    for k, v in os.environ.items()
    if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL")
}


def livebridge(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m livebridge ARGS`` from the repository root, offline."""
    return subprocess.run(
        [sys.executable, "-m", "livebridge", *args],
        cwd=REPOSITORY,
        env=OFFLINE,
        capture_output=True,
        text=True,
        timeout=seconds(120),
        check=False,
    )


def one_line_failure(result: subprocess.CompletedProcess[str], *expected: str) -> str:
    assert result.returncode == 2, result
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port some other program is listening on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), ["livebridge: ", "required: COMMAND", "livebridge --help"]),
        (("serve",), ["invalid choice: 'serve'"]),
        (("demo", "--metrics-port", "99999"), ["livebridge demo: ", "99999 is not a port"]),
        (
            ("demo", "--metrics-port", "nine"),
            ["'nine' is not a port: use a number"],
        ),
        (("demo", "--colour"), ["livebridge: unrecognized arguments: --colour"]),
        (
            ("run", "examples.embedded:tools", "--emulator", "--metrics-port", "-1"),
            ["livebridge run: ", "-1 is not a port"],
        ),
        (
            ("run", "examples.embedded:tools", "--emulator", "--policy", "timeout=soon"),
            ["livebridge run: bad --policy 'timeout=soon': timeout needs a number"],
        ),
        (
            ("run", "examples.embedded:tools", "--emulator", "--policy", "fast"),
            ["livebridge run: bad --policy 'fast': expected KEY=VALUE"],
        ),
        (
            ("run", "examples/embedded.py:tools", "--emulator"),
            ["is a file path; MODULE is a dotted module name", "try examples.embedded:tools"],
        ),
        (
            ("run", "examples.nowhere:tools", "--emulator"),
            ["no module named 'examples.nowhere'"],
        ),
    ],
)
def test_usage_errors(args: tuple[str, ...], expected: list[str]) -> None:
    one_line_failure(livebridge(*args), *expected)


def test_demo_on_a_busy_metrics_port(busy_port: int) -> None:
    line = one_line_failure(livebridge("demo", "--fast", "--metrics-port", str(busy_port)))
    assert line == (
        f"livebridge demo: cannot listen on 127.0.0.1:{busy_port} (Address already in "
        "use): pick another --metrics-port, or 0 for any free port"
    )


def test_run_on_a_busy_metrics_port(busy_port: int) -> None:
    result = livebridge(
        "run", "examples.embedded:tools", "--emulator", "--metrics-port", str(busy_port)
    )
    line = one_line_failure(result)
    assert line == (
        f"livebridge run: cannot listen on 127.0.0.1:{busy_port} (Address already in "
        "use): pick another --metrics-port, or 0 for any free port"
    )


def test_help_is_written_for_users() -> None:
    for args in ((), ("demo",), ("run",)):
        result = livebridge(*args, "--help")
        assert result.returncode == 0, result.stderr
        assert "``" not in result.stdout, result.stdout
        assert "one subcommand per feature" not in result.stdout  # the module's docstring
    main_help = livebridge("--help").stdout
    assert "livebridge demo" in main_help and "livebridge run myapp.tools:registry" in main_help
    assert "dotted module name" in livebridge("run", "--help").stdout


def test_python_dash_m_is_the_same_command() -> None:
    direct = subprocess.run(
        [str(Path(sys.executable).parent / "livebridge"), "--help"],
        capture_output=True,
        text=True,
        timeout=seconds(60),
        check=True,
    )
    assert livebridge("--help").stdout == direct.stdout


def test_demo_on_openai_without_the_openai_package() -> None:
    """Without the ``openai`` extra the OpenAI demo says what to install, in one line."""
    hidden = (
        "import sys; sys.modules['openai'] = None; from livebridge.cli.main import main; "
        "sys.exit(main(['demo', '--vendor', 'openai', '--fast']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", hidden],
        cwd=REPOSITORY,
        env=OFFLINE,
        capture_output=True,
        text=True,
        timeout=seconds(120),
        check=False,
    )
    one_line_failure(result, "--vendor openai needs the openai package", "livebridge-voice[openai]")
