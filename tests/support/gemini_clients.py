"""Clients for emulator tests: the plain google-genai SDK, and raw websockets for wire details."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from google.genai import live, types
from websockets.asyncio.client import ClientConnection, connect

from livebridge.emulator import Emulator
from tests.support.timing import seconds

MODEL = "gemini-live-2.5-flash-preview"
#: Exactly what ``livebridge emulator`` prints: one key variable (google-genai warns when it sees
#: two).
GEMINI_ENV_KEYS = frozenset({"GOOGLE_GEMINI_BASE_URL", "SSL_CERT_FILE", "GEMINI_API_KEY"})
PATH = "/ws/google.ai.generativelanguage.{version}.GenerativeService.BidiGenerateContent"


def weather_config(
    behavior: types.Behavior | None = None, modality: str = "TEXT", **extra: Any
) -> types.LiveConnectConfig:
    """A config declaring ``get_weather(city)``."""
    declaration = types.FunctionDeclaration(
        name="get_weather",
        description="Weather for a city.",
        parameters_json_schema={"type": "object", "properties": {"city": {"type": "string"}}},
        behavior=behavior,
    )
    return types.LiveConnectConfig(
        response_modalities=[types.Modality(modality)],
        tools=[types.Tool(function_declarations=[declaration])],
        **extra,
    )


def answer(call: types.FunctionCall, **fields: Any) -> types.FunctionResponse:
    city = (call.args or {}).get("city")
    return types.FunctionResponse(
        id=call.id, name=call.name, response={"output": f"sunny in {city}"}, **fields
    )


async def next_message(session: live.AsyncSession) -> types.LiveServerMessage:
    """The next server message, whatever it is (``receive()`` stops at turn ends)."""
    return await session._receive()


async def tool_call(session: live.AsyncSession) -> types.LiveServerToolCall:
    """Skip messages until a ``toolCall`` arrives."""
    while True:
        message = await next_message(session)
        if message.tool_call is not None:
            return message.tool_call


async def until_turn_complete(session: live.AsyncSession) -> list[types.LiveServerMessage]:
    """Every message up to and including the next ``turnComplete``."""
    return [message async for message in session.receive()]


def pcm(seconds: float, loud: bool, rate: int = 16000) -> bytes:
    """PCM16 audio: a square wave (speech) or zeros (silence)."""
    count = int(seconds * rate)
    if not loud:
        return bytes(2 * count)
    return b"".join(
        (8000 if (i // 40) % 2 else -8000).to_bytes(2, "little", signed=True) for i in range(count)
    )


@asynccontextmanager
async def raw_connect(
    emu: Emulator,
    *,
    path: str | None = None,
    headers: dict[str, str] | None = None,
    setup: dict[str, Any] | None = None,
) -> AsyncIterator[ClientConnection]:
    """A raw websocket to the emulator, after the setup exchange."""
    uri = f"wss://127.0.0.1:{emu.port}{path or PATH.format(version='v1beta')}"
    context = ssl.create_default_context(cafile=emu.ca_file)
    if headers is None:
        headers = {"x-goog-api-key": "test"}
    async with connect(uri, ssl=context, additional_headers=headers) as ws:
        await ws.send(json.dumps({"setup": setup or {"model": f"models/{MODEL}"}}))
        reply = json.loads(await ws.recv())
        assert "setupComplete" in reply
        yield ws


async def recv_json(ws: ClientConnection) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(await ws.recv())
    return message


async def recv_until(ws: ClientConnection, key: str) -> dict[str, Any]:
    """Skip server frames until one has the top-level ``key``."""
    while True:
        message = await recv_json(ws)
        if key in message:
            return message


async def environment_lines(
    server: asyncio.subprocess.Process, keys: frozenset[str] = GEMINI_ENV_KEYS
) -> dict[str, str]:
    """The ``KEY=VALUE`` lines ``livebridge emulator`` prints first."""
    assert server.stdout is not None
    env: dict[str, str] = {}
    while len(env) < len(keys):
        line = (await asyncio.wait_for(server.stdout.readline(), seconds(60))).decode().strip()
        name, _, value = line.partition("=")
        assert name in keys, line
        env[name] = value
    return env
