"""A real MCP server for the tests, written with the MCP SDK's server side (``MCPServer``).

Run over stdio (``python tests/mcp/server.py``) or streamable HTTP (``python tests/mcp/server.py
http PORT``, uvicorn on 127.0.0.1). What the client did to it is appended, one line each, to the
file named by ``MCP_MARKS`` (``cancelled hang``, ``started crash``), which the tests read.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

app = MCPServer("livebridge-tests", log_level="CRITICAL")


def mark(line: str) -> None:
    path = os.environ.get("MCP_MARKS")
    if path:
        with open(path, "a") as marks:
            marks.write(line + "\n")


@app.tool()
def lookup(city: str) -> dict[str, Any]:
    """Weather for a city."""
    return {"city": city, "sky": "sunny"}


@app.tool()
def describe(city: str) -> str:
    """A sentence about a city (text content, no structure)."""
    return f"{city} is lovely"


@app.tool()
async def hang(city: str) -> str:
    """Never answers (until cancelled)."""
    mark("started hang")
    try:
        await anyio.sleep_forever()
    finally:
        mark("cancelled hang")
    return "never"


@app.tool()
def crash(city: str) -> str:
    """Ends the server's process in the middle of the call."""
    mark("started crash")
    os._exit(3)


@app.tool()
def refuse(city: str) -> str:
    """Fails with a message for the model (``isError``)."""
    raise ToolError(f"no forecast for {city}")


@app.tool()
def big(megabytes: int) -> str:
    """A result of ``megabytes`` MB."""
    return "x" * (megabytes * 1024 * 1024)


@app.tool()
async def flood(count: int, ctx: Context) -> dict[str, int]:
    """Sends ``count`` progress notifications as fast as it can, then answers."""
    for step in range(count):
        await ctx.report_progress(step, count, f"step {step}")
    return {"steps": count}


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        anyio.run(lambda: app.run_streamable_http_async(port=int(sys.argv[2])))
    else:
        app.run()
