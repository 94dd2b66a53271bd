from __future__ import annotations

from typing import Any

import pytest
from google.genai import types

from livebridge import Dispatcher
from livebridge.vendors.gemini import adapter as gemini
from tests.adapters.tools import weather_tools


def model_turn(*calls: types.FunctionCall) -> types.GenerateContentResponse:
    parts = [types.Part(text="Let me look.")]
    parts += [types.Part(function_call=call) for call in calls]
    content = types.Content(role="model", parts=parts)
    return types.GenerateContentResponse(candidates=[types.Candidate(content=content)])


def text_turn(text: str) -> types.GenerateContentResponse:
    content = types.Content(role="model", parts=[types.Part(text=text)])
    return types.GenerateContentResponse(candidates=[types.Candidate(content=content)])


async def test_one_content_with_one_function_response_per_call() -> None:
    response = model_turn(
        types.FunctionCall(id="fc1", name="get_weather", args={"city": "Lima"}),
        types.FunctionCall(name="book_table", args={"restaurant": "R", "people": 2}),
        types.FunctionCall(id="fc3", name="nope", args={}),
    )
    content = await gemini.answer(response, Dispatcher(weather_tools()))
    assert isinstance(content, types.Content) and content.role == "user"
    assert content.parts is not None
    replies = [part.function_response for part in content.parts]
    assert all(isinstance(r, types.FunctionResponse) for r in replies)
    assert [(r.id, r.name) for r in replies if r] == [
        ("fc1", "get_weather"),
        (None, "book_table"),  # no id from the model: none echoed
        ("fc3", "nope"),
    ]
    assert replies[0] and replies[0].response == {
        "output": {"city": "Lima", "days": 1, "temp_c": 21}
    }
    assert replies[1] and replies[1].response == {"output": "booked R for 2"}
    assert replies[2] and replies[2].response
    assert replies[2].response["error"]["type"] == "unknown_function"


async def test_accepts_dicts_parts_and_response_dicts() -> None:
    dispatcher = Dispatcher(weather_tools())
    as_dicts = [{"id": "a", "name": "get_weather", "args": {"city": "X"}}]
    content = await gemini.answer(as_dicts, dispatcher)
    assert content.parts and content.parts[0].function_response
    assert content.parts[0].function_response.id == "a"
    parts = [types.Part(text="x"), types.Part.from_function_call(name="get_weather", args={})]
    content = await gemini.answer(parts, dispatcher)
    assert content.parts and content.parts[0].function_response
    error = content.parts[0].function_response.response
    assert error and error["error"]["type"] == "invalid_arguments"
    response_dict = model_turn(types.FunctionCall(id="b", name="get_weather", args={"city": "Y"}))
    content = await gemini.answer(response_dict.model_dump(exclude_none=True), dispatcher)
    assert content.parts and content.parts[0].function_response
    assert content.parts[0].function_response.id == "b"
    with pytest.raises(ValueError, match="no function calls"):
        await gemini.answer(text_turn("done"), dispatcher)


class ScriptedModels:
    """``client.aio.models`` seam: returns scripted responses and records each request."""

    def __init__(self, responses: list[types.GenerateContentResponse]) -> None:
        self.responses = responses
        self.requests: list[dict[str, Any]] = []

    async def generate_content(self, **request: Any) -> types.GenerateContentResponse:
        self.requests.append({**request, "contents": list(request["contents"])})
        return self.responses.pop(0)


class ScriptedClient:
    def __init__(self, responses: list[types.GenerateContentResponse]) -> None:
        self.models = ScriptedModels(responses)
        self.aio = self


async def test_tool_loop_answers_until_the_model_replies_in_text() -> None:
    tools = weather_tools()
    client = ScriptedClient(
        [
            model_turn(
                types.FunctionCall(id="1", name="get_weather", args={"city": "A"}),
                types.FunctionCall(id="2", name="get_weather", args={"city": "B"}),
            ),
            text_turn("A and B are both 21 °C."),
        ]
    )
    final = await gemini.run_tool_loop(
        client, model="m", contents="Weather in A and B?", tools=tools
    )
    assert final.text == "A and B are both 21 °C."
    first, second = client.models.requests
    config = first["config"]
    assert config.automatic_function_calling.disable is True
    declared = config.tools[0].function_declarations
    assert [d.name for d in declared] == tools.names()
    assert [c.role for c in second["contents"]] == ["user", "model", "user"]
    answers = second["contents"][2].parts
    assert [p.function_response.id for p in answers] == ["1", "2"]


async def test_tool_loop_stops_after_max_rounds() -> None:
    call = types.FunctionCall(id="1", name="get_weather", args={"city": "A"})
    client = ScriptedClient([model_turn(call), model_turn(call)])
    final = await gemini.run_tool_loop(
        client, model="m", contents=[], tools=weather_tools(), max_rounds=2
    )
    assert final.function_calls and len(client.models.requests) == 2
