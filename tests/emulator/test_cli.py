"""``livebridge emulator`` in a subprocess; a separate program uses only the printed environment."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

PROGRAM = """
import asyncio
from google import genai
from google.genai import types

async def main():
    declaration = types.FunctionDeclaration(name="get_weather", parameters_json_schema={
        "type": "object", "properties": {"city": {"type": "string"}}})
    config = types.LiveConnectConfig(response_modalities=["TEXT"],
        tools=[types.Tool(function_declarations=[declaration])])
    async with genai.Client().aio.live.connect(model="gemini-live", config=config) as session:
        await session.send_realtime_input(text="weather in Berlin")
        async for message in session.receive():
            if message.tool_call:
                await session.send_tool_response(function_responses=[
                    types.FunctionResponse(id=c.id, name=c.name, response={"output": "cold"})
                    for c in message.tool_call.function_calls])
            if message.text:
                print(message.text)

asyncio.run(main())
"""


async def test_printed_environment_points_a_program_at_the_emulator(tmp_path: Path) -> None:
    scenario = tmp_path / "scenario.json"
    scenario.write_text(
        json.dumps(
            [
                {"expect_turn": {}},
                {"tool_call": [["get_weather", {"city": "Berlin"}]]},
                {"wait_answers": {}},
                {"say": "Berlin is cold."},
                {"turn_complete": {}},
                {"model": {}},
            ]
        )
    )
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "livebridge.cli",
        "emulator",
        "--scenario",
        str(scenario),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert server.stdout is not None
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GEMINI_"))}
        for _ in range(3):
            name, _, value = (
                (await asyncio.wait_for(server.stdout.readline(), 60))
                .decode()
                .strip()
                .partition("=")
            )
            env[name] = value
        assert {"GOOGLE_GEMINI_BASE_URL", "SSL_CERT_FILE", "GEMINI_API_KEY"} <= set(env)
        program = await asyncio.create_subprocess_exec(
            sys.executable, "-c", PROGRAM, env=env, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await asyncio.wait_for(program.communicate(), 60)
        assert program.returncode == 0
        assert out.decode().strip() == "Berlin is cold."
    finally:
        server.terminate()
        assert await asyncio.wait_for(server.wait(), 30) == 0
