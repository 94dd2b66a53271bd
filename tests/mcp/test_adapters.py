"""An MCP server's tools through the non-streaming adapters: declared while the registry's
servers run (``connect_mcp``; ``run_tool_loop`` does it itself), answered like any tool."""

from __future__ import annotations

import json

from google.genai import types

import livebridge
from livebridge.adapters import openai
from livebridge.vendors.gemini import adapter as gemini
from tests.adapters.test_gemini import ScriptedClient, model_turn, text_turn
from tests.mcp.test_stdio import server
from tests.mcp.test_vendors import CITY


async def test_the_gemini_tool_loop_lists_and_calls_the_server() -> None:
    tools = livebridge.ToolRegistry()
    tools.add_mcp(server(), include=["lookup"])
    client = ScriptedClient(
        [
            model_turn(
                types.FunctionCall(id="1", name="lookup", args={"city": "Oslo"}),
                types.FunctionCall(id="2", name="lookup", args={"town": "Lima"}),
            ),
            text_turn("Sunny in Oslo."),
        ]
    )
    final = await gemini.run_tool_loop(client, model="m", contents="Oslo?", tools=tools)
    assert final.text == "Sunny in Oslo."
    first, second = client.models.requests
    (declared,) = first["config"].tools[0].function_declarations
    assert (declared.name, declared.parameters_json_schema) == ("lookup", CITY)
    answers = [part.function_response for part in second["contents"][2].parts]
    assert answers[0].response == {"output": {"city": "Oslo", "sky": "sunny"}}
    assert answers[1].response["error"]["type"] == "invalid_arguments"
    assert tools.names() == ["lookup"]  # listed, and the server stopped after the loop


async def test_openai_chat_answers_within_connect_mcp() -> None:
    tools = livebridge.ToolRegistry()
    tools.add_mcp(server(), include=["refuse"])
    async with tools.connect_mcp():
        calls = [{"id": "c1", "function": {"name": "refuse", "arguments": '{"city": "Rome"}'}}]
        (message,) = await openai.answer_chat(calls, livebridge.Dispatcher(tools))
    assert message["tool_call_id"] == "c1"
    error = json.loads(message["content"])["error"]
    assert error["type"] == "tool_error" and "no forecast for Rome" in error["message"]
