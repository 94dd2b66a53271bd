import json

from openai.types.chat import ChatCompletionMessage, ChatCompletionMessageToolCall
from openai.types.chat.chat_completion_message_function_tool_call import Function
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage

from livebridge import Dispatcher
from livebridge.vendors.openai import adapter as openai
from tests.adapters.tools import weather_tools


def tool_call(call_id: str, name: str, arguments: str) -> ChatCompletionMessageToolCall:
    function = Function(name=name, arguments=arguments)
    return ChatCompletionMessageToolCall(id=call_id, type="function", function=function)


async def test_chat_tool_calls_get_one_tool_message_each() -> None:
    message = ChatCompletionMessage(
        role="assistant",
        content=None,
        tool_calls=[
            tool_call("call_1", "get_weather", '{"city": "Paris"}'),
            tool_call("call_2", "book_table", '{"restaurant": "Chez", "people": 12}'),
            tool_call("call_3", "get_weather", "{not json"),
        ],
    )
    assert message.tool_calls is not None
    answers = await openai.answer_chat(message.tool_calls, Dispatcher(weather_tools()))
    assert [a["role"] for a in answers] == ["tool"] * 3
    assert [a["tool_call_id"] for a in answers] == ["call_1", "call_2", "call_3"]
    contents = [json.loads(a["content"]) for a in answers]
    assert contents[0] == {"output": {"city": "Paris", "days": 1, "temp_c": 21}}
    assert contents[1]["error"]["type"] == "tool_error"
    assert contents[2]["error"]["type"] == "invalid_arguments"
    assert "not valid JSON" in contents[2]["error"]["message"]  # not "must be an object"


async def test_chat_accepts_dicts_and_empty_arguments() -> None:
    tools = weather_tools()

    @tools.tool
    async def ping() -> str:
        return "pong"

    calls = [{"id": "a", "type": "function", "function": {"name": "ping", "arguments": ""}}]
    [answer] = await openai.answer_chat(calls, Dispatcher(tools))
    assert answer == {"role": "tool", "tool_call_id": "a", "content": '{"output":"pong"}'}


async def test_responses_function_calls_get_function_call_outputs() -> None:
    text = ResponseOutputMessage.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Let me check.", "annotations": []}],
        }
    )
    items = [
        text,
        ResponseFunctionToolCall(
            type="function_call", call_id="fc_1", name="get_weather", arguments='{"city":"Oslo"}'
        ),
        {"type": "function_call", "call_id": "fc_2", "name": "nope", "arguments": "{}"},
    ]
    answers = await openai.answer_responses(items, Dispatcher(weather_tools()))
    assert [(a["type"], a["call_id"]) for a in answers] == [
        ("function_call_output", "fc_1"),
        ("function_call_output", "fc_2"),
    ]
    assert json.loads(answers[0]["output"])["output"]["city"] == "Oslo"
    assert json.loads(answers[1]["output"])["error"]["type"] == "unknown_function"
