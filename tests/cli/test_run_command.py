"""``livebridge run MODULE:ATTR``: the happy path on the emulator; one clear line per failure."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import anyio
import pytest

from livebridge.emulator import Emulator
from tests.support.timing import seconds

TOOLS_MODULE = '''
import livebridge

registry = livebridge.ToolRegistry()
not_a_registry = 42
empty = livebridge.ToolRegistry()


@registry.tool
async def get_weather(city: str) -> dict[str, str]:
    """Weather for a city."""
    if city == "Rome":
        raise livebridge.ToolError("no data for Rome")
    return {"city": city, "sky": "sunny"}
'''


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    (tmp_path / "travel_tools.py").write_text(TOOLS_MODULE)
    (tmp_path / "broken_tools.py").write_text("import not_installed_anywhere\n")
    return tmp_path


def environment(**extra: str) -> dict[str, str]:
    """This process's environment without any API key or endpoint, plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "OPENAI_API_KEY")
    }
    return env | extra


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "livebridge.cli.main", "run", *args]


def run(
    cwd: Path, *args: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(*args),
        cwd=cwd,
        env=dict(env) if env is not None else environment(),
        capture_output=True,
        text=True,
        timeout=seconds(60),
        check=False,
    )


def assert_one_line_failure(result: subprocess.CompletedProcess[str], expected: str) -> None:
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("livebridge run: ")
    assert expected in lines[0]


def test_weather_in_two_cities_on_the_emulator(app_dir: Path) -> None:
    result = run(
        app_dir, "travel_tools:registry", "--emulator", "--text", "weather in Paris and Rome"
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "tools: get_weather" in out
    assert "you   > weather in Paris and Rome" in out
    assert "✓ get_weather(city='Paris') → ok" in out
    assert "✗ get_weather(city='Rome') → error" in out and "no data for Rome" in out
    assert "model > Paris: city Paris, sky sunny; Rome: that failed (no data for Rome)." in out
    assert "Traceback" not in result.stderr


def test_the_same_registry_on_openai_realtime(app_dir: Path) -> None:
    result = run(
        app_dir,
        "travel_tools:registry",
        "--vendor",
        "openai",
        "--emulator",
        "--text",
        "weather in Paris and Rome",
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "connected to gpt-realtime-2; tools: get_weather" in out
    assert "✓ get_weather(city='Paris') → ok" in out
    assert "✗ get_weather(city='Rome') → error" in out and "no data for Rome" in out
    assert "model > Paris: city Paris, sky sunny; Rome: that failed" in out


def test_the_same_registry_on_gpt_live(app_dir: Path) -> None:
    """``--vendor openai --model gpt-live-1.1``: the emulator's GPT-Live side, and the session
    config GPT-Live's strict schema takes (the vendor descriptor's, not Realtime's), and the
    reply printed once."""
    result = run(
        app_dir,
        "travel_tools:registry",
        "--vendor",
        "openai",
        "--model",
        "gpt-live-1.1",
        "--emulator",
        "--text",
        "weather in Paris and Rome",
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "connected to gpt-live-1.1; tools: get_weather" in out
    assert "✓ get_weather(city='Paris') → ok" in out
    assert "✗ get_weather(city='Rome') → error" in out and "no data for Rome" in out
    # The backend's text and the transcript of the voice speaking it: the reply printed once.
    reply = next(line for line in out.splitlines() if line.startswith("model > "))
    assert reply.count("Here is what I found.") == 1, reply


def test_turns_from_standard_input_and_a_metrics_endpoint(app_dir: Path) -> None:
    result = subprocess.run(
        command("travel_tools:registry", "--emulator", "--metrics-port", "0"),
        cwd=app_dir,
        env=environment(),
        input="weather in Tokyo\n\nweather in Lisbon\n",
        capture_output=True,
        text=True,
        timeout=seconds(60),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("metrics: http://127.0.0.1:")
    assert result.stdout.count("you   > ") == 2
    assert "get_weather(city='Tokyo') → ok" in result.stdout
    assert "get_weather(city='Lisbon') → ok" in result.stdout


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["nowhere_module:registry", "--emulator"], "no module named 'nowhere_module'"),
        (["broken_tools:registry", "--emulator"], "importing 'broken_tools' failed"),
        (
            ["travel_tools:nope", "--emulator"],
            "has no attribute 'nope'; ToolRegistry objects in it",
        ),
        (["travel_tools:not_a_registry", "--emulator"], "not a livebridge.ToolRegistry"),
        (["travel_tools", "--emulator"], "expected MODULE:ATTR"),
        (["travel_tools:registry", "--emulator", "--policy", "speed=9"], "expected KEY=VALUE"),
        (["travel_tools:registry", "--emulator", "--policy", "timeout=soon"], "needs a number"),
        (["travel_tools:registry", "--emulator", "--policy", "max_parallel=0"], "at least 1"),
        (["travel_tools:registry", "--text", "hi"], "no API key: set GEMINI_API_KEY"),
        (
            ["travel_tools:registry", "--vendor", "openai", "--text", "hi"],
            "no API key: set OPENAI_API_KEY",
        ),
        (
            ["travel_tools:empty", "--emulator"],
            "travel_tools:empty has no tools: register them with @empty.tool",
        ),
    ],
)
def test_each_usage_error_is_one_line(app_dir: Path, args: list[str], expected: str) -> None:
    assert_one_line_failure(run(app_dir, *args), expected)


def test_an_unreachable_service_is_one_line(app_dir: Path) -> None:
    env = environment(
        GEMINI_API_KEY="test", GOOGLE_GEMINI_BASE_URL=f"https://127.0.0.1:{closed_port()}"
    )
    result = run(app_dir, "travel_tools:registry", "--text", "hi", env=env)
    assert_one_line_failure(result, "cannot reach https://127.0.0.1:")


async def test_a_model_the_service_does_not_serve_is_one_line(app_dir: Path) -> None:
    async with Emulator(models=["gemini-live-2.5-flash-preview"]) as emu:
        result = await anyio.run_process(
            command("travel_tools:registry", "--model", "gemini-nope", "--text", "hi"),
            cwd=app_dir,
            env=environment(**emu.env()),
            check=False,
        )
    stderr = result.stderr.decode()
    assert result.returncode == 2
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines() == [
        "livebridge run: model 'gemini-nope' is not available for the Live API: "
        "pass --model with a Live model"
    ]
