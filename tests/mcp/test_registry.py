"""What ``add_mcp`` declares: filters, prefixes, per-tool options, and clashes refused at connect
naming both sides."""

from __future__ import annotations

import pytest

import livebridge
from livebridge.emulator import Emulator
from livebridge.mcp.tools import MCPTool
from tests.mcp.test_stdio import server
from tests.support.gemini_sessions import open_session


async def test_a_name_clash_fails_connect_naming_both_and_nothing_opens() -> None:
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def lookup(city: str) -> str:
        """A Python tool of the same name."""
        return city

    mcp_server = server()
    tools.add_mcp(mcp_server, include=["lookup"])
    async with Emulator() as emu:
        with pytest.raises(livebridge.MCPError) as raised:
            async with open_session(emu, tools):
                raise AssertionError("connected")
        assert emu.transcript == []
    message = str(raised.value)
    assert mcp_server.name in message and "the registry's tool 'lookup'" in message
    assert "prefix=" in message

    twice = livebridge.ToolRegistry()
    twice.add_mcp(server(), include=["describe"])
    twice.add_mcp(server(name="second"), include=["describe"])
    with pytest.raises(livebridge.MCPError, match=r"'second'.*'describe'.*already declares"):
        async with twice.connect_mcp():
            raise AssertionError("connected")


async def test_filters_prefix_and_per_tool_options() -> None:
    tools = livebridge.ToolRegistry()
    tools.add_mcp(
        server(),
        exclude=["crash", "big", "flood"],
        prefix="kb_",
        timeout=3.0,
        idempotent=True,
        per_tool={"hang": {"timeout": 0.5, "name": "wait_forever", "behavior": "NON_BLOCKING"}},
    )
    async with tools.connect_mcp():
        declared = {tool.name: tool for tool in tools}
    assert set(declared) == {"kb_lookup", "kb_describe", "wait_forever", "kb_refuse"}
    hang = declared["wait_forever"]
    assert isinstance(hang, MCPTool) and hang.remote == "hang"
    assert (hang.timeout, hang.behavior, hang.idempotent) == (0.5, "NON_BLOCKING", True)
    assert (declared["kb_lookup"].timeout, declared["kb_lookup"].behavior) == (3.0, "BLOCKING")

    default = livebridge.ToolRegistry()
    default.add_mcp(server(), include=["lookup"])
    async with default.connect_mcp():
        (tool,) = default
    assert tool.timeout == 10.0  # MCP tools' own default

    missing = livebridge.ToolRegistry()
    missing.add_mcp(server(), include=["nope"])
    with pytest.raises(livebridge.MCPError, match=r"has no tool 'nope' \(it lists .*lookup"):
        async with missing.connect_mcp():
            raise AssertionError("connected")


def test_options_a_whole_server_cannot_take() -> None:
    tools = livebridge.ToolRegistry()
    with pytest.raises(TypeError, match="per_tool"):
        tools.add_mcp(server(), name="x")
    with pytest.raises(TypeError, match="unknown add_mcp option"):
        tools.add_mcp(server(), color="red")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="timeout must be positive"):
        tools.add_mcp(server(), timeout=0)
