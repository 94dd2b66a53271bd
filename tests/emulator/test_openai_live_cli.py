"""``livebridge emulator --model gpt-live-1.1`` serves GPT-Live to a separate program's
unmodified ``openai`` SDK, and its summary names each peer fault the program made."""

from __future__ import annotations

import asyncio
import json
import signal
import ssl
import sys
from typing import Any

import openai

from tests.support.gemini_clients import environment_lines
from tests.support.timing import seconds

CLI = [sys.executable, "-m", "livebridge.cli.main"]
KEYS = frozenset({"OPENAI_BASE_URL", "OPENAI_API_KEY", "SSL_CERT_FILE"})


async def test_the_command_serves_gpt_live_and_names_a_fault() -> None:
    server = await asyncio.create_subprocess_exec(
        *CLI, "emulator", "--model", "gpt-live-1.1", stdout=asyncio.subprocess.PIPE
    )
    try:
        env = await environment_lines(server, KEYS)
        client = openai.AsyncOpenAI(api_key=env["OPENAI_API_KEY"], base_url=env["OPENAI_BASE_URL"])
        context = ssl.create_default_context(cafile=env["SSL_CERT_FILE"])
        options: Any = {"ssl": context}  # websockets takes it; the SDK passes it on
        async with client.live.connect(websocket_connection_options=options) as conn:
            start = {"type": "session.start", "session": {"model": "gpt-live-1.1"}}
            await conn.send_raw(json.dumps(start))
            started = json.loads(await conn.recv_bytes())
            assert started["type"] == "session.started"
            assert started["session"]["id"].startswith("live_")
            await conn.send_raw(json.dumps({"type": "turn.done"}))  # an alpha-era event
            assert json.loads(await conn.recv_bytes())["type"] == "error"
    finally:
        server.send_signal(signal.SIGTERM)
        summary, _ = await asyncio.wait_for(server.communicate(), seconds(30))
    lines = summary.decode().splitlines()
    assert any(line.strip().startswith("verdict T10:") for line in lines)
    assert lines[-1] == "FAIL: the client broke the contract"
