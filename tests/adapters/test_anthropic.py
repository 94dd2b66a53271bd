import json

from anthropic.types import Message, TextBlock, ToolUseBlock, Usage

from livebridge import Dispatcher
from livebridge.vendors import anthropic
from tests.adapters.tools import weather_tools


def assistant_message() -> Message:
    return Message(
        id="msg_1",
        type="message",
        role="assistant",
        model="claude",
        content=[
            TextBlock(type="text", text="Checking."),
            ToolUseBlock(type="tool_use", id="toolu_1", name="get_weather", input={"city": "Rome"}),
            ToolUseBlock(
                type="tool_use", id="toolu_2", name="book_table", input={"restaurant": "X"}
            ),
        ],
        stop_reason="tool_use",
        stop_sequence=None,
        usage=Usage(input_tokens=1, output_tokens=1),
    )


async def test_one_user_message_of_tool_results() -> None:
    message = assistant_message()
    reply = await anthropic.answer(message.content, Dispatcher(weather_tools()))
    assert reply["role"] == "user"
    first, second = reply["content"]
    assert first["type"] == "tool_result" and first["tool_use_id"] == "toolu_1"
    assert "is_error" not in first
    assert json.loads(first["content"])["output"]["city"] == "Rome"
    assert second["tool_use_id"] == "toolu_2" and second["is_error"] is True
    assert json.loads(second["content"])["error"]["type"] == "invalid_arguments"


async def test_accepts_a_whole_message_or_dicts() -> None:
    tools = weather_tools()
    from_message = await anthropic.answer(assistant_message(), Dispatcher(tools))
    assert len(from_message["content"]) == 2
    as_dict = {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "A"}}
        ],
    }
    reply = await anthropic.answer(as_dict, Dispatcher(tools))
    assert [b["tool_use_id"] for b in reply["content"]] == ["t1"]
