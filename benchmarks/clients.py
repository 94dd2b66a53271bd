"""The clients compared: livebridge and the usual ways of answering Live tool calls.

Each runs ``turns`` tool turns against a ``benchmarks.server`` scenario, answering every call of
``work(i)`` after ``delay`` seconds with ``{"output": {"i": i}}``:

- ``livebridge``: ``LiveSession`` on the wire transport;
- ``sdk-serial``: the documented google-genai loop, each call run and answered one by one;
- ``sdk-gather``: google-genai, the calls of a turn run with ``asyncio.gather``, one answer;
- ``raw``: websockets + msgspec + ``asyncio.gather`` + immediate send: the floor.

Every client's websocket goes without permessage-deflate (``livebridge.client_args()``), and
every client asks for session resumption, as a production client must (a Live connection lasts
minutes; without a handle the conversation dies with it). So the server sends each the same
frames: the ``sessionResumptionUpdate`` after each ``toolCall`` and ``turnComplete`` included.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from google.genai import types
from websockets.asyncio.client import connect

from benchmarks.server import Server, declaration
from livebridge import CallPolicy, ToolRegistry, client_args
from livebridge.live.options import SessionOptions
from livebridge.live.session import LiveSession
from livebridge.protocol.events import TurnComplete
from livebridge.vendors.gemini import wire

Client = Callable[[Server, str, int, float], Awaitable[None]]
PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"


async def work(i: int, delay: float) -> dict[str, int]:
    if delay:
        await asyncio.sleep(delay)
    return {"i": i}


def sdk_config() -> types.LiveConnectConfig:
    resumption = types.SessionResumptionConfig()
    return types.LiveConnectConfig(tools=[declaration()], session_resumption=resumption)


def answer(call: types.FunctionCall, result: dict[str, int]) -> types.FunctionResponse:
    return types.FunctionResponse(id=call.id, name=call.name, response={"output": result})


async def livebridge_client(server: Server, model: str, turns: int, delay: float) -> None:
    tools = ToolRegistry()

    @tools.tool(name="work")
    async def handler(i: int) -> dict[str, int]:
        """Benchmark work."""
        return await work(i, delay)

    options = SessionOptions(transport="wire")
    policy = CallPolicy(max_parallel=16)  # the default (8) would run K = 16 in two waves
    async with LiveSession.connect(
        server.client(), model=model, tools=tools, policy=policy, options=options
    ) as session:
        done = 0
        async for event in session.events():
            if isinstance(event, TurnComplete):
                done += 1
                if done == turns:
                    return


async def sdk_serial_client(server: Server, model: str, turns: int, delay: float) -> None:
    client = server.client()
    async with client.aio.live.connect(model=model, config=sdk_config()) as session:
        for _ in range(turns):
            async for message in session.receive():
                if message.tool_call is None:
                    continue
                for call in message.tool_call.function_calls or []:
                    result = await work(int((call.args or {})["i"]), delay)
                    await session.send_tool_response(function_responses=[answer(call, result)])


async def sdk_gather_client(server: Server, model: str, turns: int, delay: float) -> None:
    client = server.client()
    async with client.aio.live.connect(model=model, config=sdk_config()) as session:
        for _ in range(turns):
            async for message in session.receive():
                if message.tool_call is None:
                    continue
                calls = message.tool_call.function_calls or []
                results = await asyncio.gather(
                    *(work(int((call.args or {})["i"]), delay) for call in calls)
                )
                responses = [answer(c, r) for c, r in zip(calls, results, strict=True)]
                await session.send_tool_response(function_responses=responses)


def raw_setup(model: str) -> bytes:
    tools = [declaration().model_dump(mode="json", by_alias=True, exclude_none=True)]
    setup = {"model": f"models/{model}", "tools": tools, "sessionResumption": {}}
    return json.dumps({"setup": setup}).encode()


def raw_connect(server: Server, model: str) -> connect:
    """A websocket to ``server``, set up for ``model``, as ``LiveSession``'s is configured."""
    uri = server.base_url.replace("https://", "wss://") + PATH
    headers = {"x-goog-api-key": "test"}
    return connect(uri, additional_headers=headers, **client_args(ssl=server.ssl_context()))


async def raw_client(server: Server, model: str, turns: int, delay: float) -> None:
    async with raw_connect(server, model) as ws:
        await ws.send(raw_setup(model), text=True)
        await ws.recv(decode=False)
        done = 0
        while done < turns:
            message = wire.decode_server(await ws.recv(decode=False))
            if message.tool_call is not None:
                calls = message.tool_call.function_calls
                results = await asyncio.gather(
                    *(work(int((call.args or {})["i"]), delay) for call in calls)
                )
                responses: list[dict[str, Any]] = [
                    {"id": c.id, "name": c.name, "response": {"output": r}}
                    for c, r in zip(calls, results, strict=True)
                ]
                frame = wire.encode({"toolResponse": {"functionResponses": responses}})
                await ws.send(frame, text=True)
            content = message.server_content
            if content is not None and content.turn_complete:
                done += 1


CLIENTS: dict[str, Client] = {
    "livebridge": livebridge_client,
    "sdk-serial": sdk_serial_client,
    "sdk-gather": sdk_gather_client,
    "raw": raw_client,
}
