"""The same tools answering a Gemini ``generate_content`` turn, an OpenAI-style turn and an
Anthropic-style turn, through ``livebridge.adapters`` (same dispatcher, same contract).

    python examples/generate_content.py

Offline: each vendor's model turn is built here (from the vendor SDK's own types when it is
installed, else as plain dicts of the same shape), so no key and no network are needed.
"""

import json
from typing import Any

import anyio
from google.genai import types

import livebridge
from livebridge.adapters import anthropic, gemini, openai

tools = livebridge.ToolRegistry()


@tools.tool(timeout=5.0, idempotent=True)
async def get_weather(city: str) -> dict[str, str]:
    """Current weather for a city."""
    return {"city": city, "sky": "sunny"}


@tools.tool
async def get_traffic(city: str) -> str:
    """Road traffic for a city."""
    raise livebridge.ToolError(f"no traffic feed for {city}")


def gemini_turn() -> types.GenerateContentResponse:
    """A model turn calling two functions, as ``generate_content`` returns it."""
    parts = [
        types.Part(function_call=types.FunctionCall(id=f"g{n}", name="get_weather", args=args))
        for n, args in enumerate([{"city": "Paris"}, {"city": "Tokyo"}], start=1)
    ]
    # A call without an id (as some Gemini models send them) is answered by name alone.
    parts.append(
        types.Part(function_call=types.FunctionCall(name="get_traffic", args={"city": "Paris"}))
    )
    content = types.Content(role="model", parts=parts)
    return types.GenerateContentResponse(candidates=[types.Candidate(content=content)])


def openai_tool_calls() -> list[Any]:
    """An assistant message's ``tool_calls`` (Chat Completions)."""
    calls = [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        },
        {
            "id": "call_2",
            "type": "function",
            "function": {"name": "get_traffic", "arguments": '{"city": "Paris"}'},
        },
    ]
    try:
        from openai.types.chat import ChatCompletionMessageFunctionToolCall
    except ImportError:
        return calls
    return [ChatCompletionMessageFunctionToolCall.model_validate(call) for call in calls]


def anthropic_content() -> list[Any]:
    """An assistant message's content: text, then ``tool_use`` blocks (Messages API)."""
    blocks: list[dict[str, Any]] = [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Rome"}},
        {"type": "tool_use", "id": "toolu_2", "name": "get_forecast", "input": {"city": "Rome"}},
    ]
    try:
        from anthropic.types import TextBlock, ToolUseBlock
    except ImportError:
        return blocks
    return [
        ToolUseBlock.model_validate(b) if b["type"] == "tool_use" else TextBlock.model_validate(b)
        for b in blocks
    ]


async def main() -> None:
    dispatcher = livebridge.Dispatcher(tools)
    answer = await gemini.answer(gemini_turn(), dispatcher)
    print("Gemini generate_content: one Content of function_response parts")
    print(json.dumps(answer.model_dump(mode="json", exclude_none=True), indent=2))
    print("OpenAI Chat Completions: one role=tool message per tool_call_id")
    print(json.dumps(await openai.answer_chat(openai_tool_calls(), dispatcher), indent=2))
    print("Anthropic Messages: one user message of tool_result blocks")
    print(json.dumps(await anthropic.answer(anthropic_content(), dispatcher), indent=2))


if __name__ == "__main__":
    anyio.run(main)
