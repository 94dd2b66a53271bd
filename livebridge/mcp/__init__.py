"""MCP servers as tools: ``ToolRegistry.add_mcp(MCPServer.stdio(...))``.

Needs the MCP SDK (the ``livebridge-voice[mcp]`` extra), imported only when a server is used.

Each server's tools are listed when a session connects and answered under the same contract as
Python tools: a hung server is a ``timeout`` (and ``notifications/cancelled``), a dead one
``unavailable`` and restarted, an ``isError`` result the server's text as a ``tool_error``.
"""

from livebridge.errors import MCPError
from livebridge.mcp.server import MCPServer

__all__ = ["MCPError", "MCPServer"]
