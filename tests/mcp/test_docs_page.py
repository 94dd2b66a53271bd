"""docs/mcp.md's server and agent, and docs/emulator.md's test of an MCP-backed agent, run as
shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from livebridge.emulator import Emulator
from tests.test_readme import block, offline_environment, pytest_in, run_python


def weather_server(directory: Path) -> None:
    (directory / "weather_server.py").write_text(block("An MCP server", "docs/mcp.md"))


async def test_the_mcp_page_program_runs_against_the_emulator(tmp_path: Path) -> None:
    weather_server(tmp_path)
    program = block("Its tools in a session", "docs/mcp.md")
    async with Emulator() as emulator:  # serves from its own thread: the run may block
        out = run_python(program, offline_environment(**emulator.env()), tmp_path)
        assert emulator.violations == []
    assert out.startswith("tools: get_forecast\n")
    assert out.count("[get_forecast: ok]") == 2
    assert "Oslo: city Oslo, sky sunny; Lima: city Lima, sky sunny." in out


@pytest.mark.slow
def test_the_emulator_page_test_of_an_mcp_agent_passes(tmp_path: Path) -> None:
    weather_server(tmp_path)
    code = block("An agent with MCP tools, offline", "docs/emulator.md")
    (tmp_path / "test_agent.py").write_text(code)
    pytest_in(tmp_path, "-o", "asyncio_mode=auto")
