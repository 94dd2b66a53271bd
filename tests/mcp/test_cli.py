"""``livebridge run --mcp`` and ``livebridge phone --mcp``: an MCP server's tools from the command
line, and one line when it cannot start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_cli_errors import OFFLINE, livebridge, one_line_failure
from tests.mcp.test_lifecycle import alive
from tests.support.timing import seconds

FORECAST_SERVER = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("forecast", log_level="CRITICAL")


@server.tool()
def get_forecast(city: str) -> dict[str, str]:
    """Weather forecast for a city."""
    return {"city": city, "sky": "sunny"}


if __name__ == "__main__":
    server.run()
'''

TOOLS_MODULE = '''
import livebridge

registry = livebridge.ToolRegistry()


@registry.tool
async def get_weather(city: str) -> dict:
    """Weather for a city."""
    return {"city": city, "sky": "cloudy"}
'''


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    (tmp_path / "forecast_server.py").write_text(FORECAST_SERVER)
    (tmp_path / "travel_tools.py").write_text(TOOLS_MODULE)
    (tmp_path / "empty_tools.py").write_text(
        "import livebridge\n\nregistry = livebridge.ToolRegistry()\n"
    )
    return tmp_path


def run_in(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "livebridge", *args],
        cwd=cwd,
        env=OFFLINE,
        capture_output=True,
        text=True,
        timeout=seconds(120),
        check=False,
    )


def server_command(app_dir: Path) -> str:
    return f"{sys.executable} {app_dir / 'forecast_server.py'}"


@pytest.mark.slow
def test_run_with_only_an_mcp_server(app_dir: Path) -> None:
    args = ["run", "--mcp", server_command(app_dir), "--emulator", "--text", "Weather in Oslo?"]
    result = run_in(app_dir, *args)
    assert result.returncode == 0, result.stderr
    assert "tools: get_forecast" in result.stdout
    assert "✓ get_forecast(city='Oslo') → ok" in result.stdout
    assert "Oslo: city Oslo, sky sunny." in result.stdout


def test_run_with_a_registry_and_an_mcp_server(app_dir: Path) -> None:
    mcp = ["--mcp", server_command(app_dir)]
    result = run_in(app_dir, "run", "travel_tools:registry", *mcp, "--emulator", "--text", "Lima")
    assert result.returncode == 0, result.stderr
    assert "tools: get_weather, get_forecast" in result.stdout
    assert "✓ get_weather(city='Lima') → ok" in result.stdout
    assert "✓ get_forecast(city='Lima') → ok" in result.stdout


def test_a_registry_without_tools_of_its_own_takes_the_mcp_servers(app_dir: Path) -> None:
    mcp = ["--mcp", server_command(app_dir)]
    result = run_in(app_dir, "run", "empty_tools:registry", *mcp, "--emulator", "--text", "Lima")
    assert result.returncode == 0, result.stderr
    assert "✓ get_forecast(city='Lima') → ok" in result.stdout
    one_line_failure(run_in(app_dir, "run", "empty_tools:registry", "--emulator"), "no tools")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("run", "--emulator"), ["give MODULE:ATTR", "--mcp"]),
        (("phone", "--emulator"), ["give MODULE:ATTR", "--mcp"]),
        (("run", "--mcp", "", "--emulator"), ["bad --mcp ''"]),
        (("run", "--mcp", "ftp://host/mcp", "--emulator"), ["bad --mcp"]),
        (
            ("run", "--mcp", "/nonexistent/mcp-server", "--emulator", "--text", "hi"),
            ["MCP server 'mcp-server': could not start", "check the --mcp"],
        ),
        (
            (
                "phone",
                "--mcp",
                "/nonexistent/mcp-server",
                "--emulator",
                "--no-signature-check",
                "--port",
                "0",
            ),
            ["MCP server 'mcp-server': could not start", "check the --mcp"],
        ),
    ],
)
def test_mcp_usage_errors(args: tuple[str, ...], expected: list[str]) -> None:
    one_line_failure(livebridge(*args), *expected)


@pytest.fixture
def phone(app_dir: Path) -> Iterator[subprocess.Popen[str]]:
    command = [
        "phone",
        "--mcp",
        server_command(app_dir),
        "--emulator",
        "--no-signature-check",
        "--port",
        "0",
    ]
    process = subprocess.Popen(
        [sys.executable, "-m", "livebridge", *command],
        cwd=app_dir,
        env={**OFFLINE, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
        assert process.stdout is not None
        process.stdout.close()


def children_running(parent: int, marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and marker in cmdline:
            found.append(int(entry.name))
    return found


def test_phone_lists_the_mcp_server_first_and_stops_it_on_sigterm(
    phone: subprocess.Popen[str],
) -> None:
    assert phone.stdout is not None
    line = phone.stdout.readline()
    assert line.startswith("listening on ws://127.0.0.1:"), line
    (server,) = children_running(phone.pid, "forecast_server.py")  # running before it listens
    phone.send_signal(signal.SIGTERM)
    assert phone.wait(timeout=seconds(30)) == 0
    assert not alive(server)
