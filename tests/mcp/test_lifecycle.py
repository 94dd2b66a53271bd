"""MCP stdio servers end with their last user, also when the app is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import suppress
from pathlib import Path

import anyio

from tests.support.timing import seconds

RAW = str(Path(__file__).with_name("raw_server.py"))
APP = f"""
import anyio, sys
import livebridge
from livebridge.mcp import MCPServer

async def main():
    tools = livebridge.ToolRegistry()
    tools.add_mcp(MCPServer.stdio(sys.executable, {RAW!r}, "--linger", start_timeout=60))
    async with tools.connect_mcp():
        print("listed", *tools.names(), flush=True)
        await anyio.sleep_forever()

anyio.run(main)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def server_pids() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if RAW.encode() in cmdline and b"--linger" in cmdline:
                found.append(int(entry.name))
    return found


async def test_a_server_ends_when_the_app_is_terminated() -> None:
    before = set(server_pids())
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    app = await anyio.open_process([sys.executable, "-c", APP], env=env, stderr=subprocess.DEVNULL)
    try:
        assert app.stdout is not None
        with anyio.fail_after(seconds(60)):
            line = b""
            while b"\n" not in line:
                line += await app.stdout.receive()
        assert line.split() == [b"listed", b"garble", b"lookup"]
        (server,) = set(server_pids()) - before - {app.pid}
        app.send_signal(signal.SIGTERM)
        await app.wait()
    finally:
        with suppress(ProcessLookupError):
            app.kill()
        await app.aclose()
    with anyio.fail_after(seconds(30)):
        while alive(server):  # noqa: ASYNC110 (another process's end has no event here)
            await anyio.sleep(0.05)
