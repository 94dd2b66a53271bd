"""The default model: any capitalised place name, any function taking one string."""

from __future__ import annotations

import pytest
from google.genai import types
from hypothesis import given, settings
from hypothesis import strategies as st

from livebridge import wire
from livebridge.emulator import Emulator
from livebridge.emulator.model import JOINERS, NOT_PLACES, named_places, place_parameter

from .helpers import MODEL, tool_call, until_turn_complete

_letters = st.text(alphabet="abcdefghijklmnopqrstuvwxyzäéøüß", min_size=2, max_size=10)
_word = st.builds(
    lambda first, rest: first + rest, st.sampled_from("ABCDEFGHIJKLMNOPRSTUVWÅÉÜ"), _letters
)
_place = (
    st.lists(_word, min_size=1, max_size=3)
    .map(" ".join)
    .filter(lambda place: not any(w.lower() in NOT_PLACES | JOINERS for w in place.split()))
)
_templates = st.sampled_from(
    [
        "weather in {} and in {}",
        "{} and {}",
        "What's the weather in {}, and {}?",
        "Is it raining in {} today? And in {} tomorrow?",
        "I'm flying from {} to {} on Friday.",
        "{}, then {}.",
    ]
)


@settings(max_examples=300, deadline=None)
@given(_templates, st.lists(_place, min_size=2, max_size=2, unique=True))
def test_every_generated_place_is_found_in_order(template: str, places: list[str]) -> None:
    assert named_places(template.format(*places)) == places


@pytest.mark.parametrize(
    ("text", "places"),
    [
        ("weather in Oslo and in Lisbon", ["Oslo", "Lisbon"]),
        ("Reykjavik and Ulaanbaatar", ["Reykjavik", "Ulaanbaatar"]),
        (
            "Rio de Janeiro, São Paulo and New York on Monday",
            ["Rio de Janeiro", "São Paulo", "New York"],
        ),
        ("Frankfurt am Main or Stratford-upon-Avon?", ["Frankfurt am Main", "Stratford-upon-Avon"]),
        ("What's the weather like?", []),
        ("Oslo, oslo and Oslo", ["Oslo"]),
    ],
)
def test_named_places(text: str, places: list[str]) -> None:
    assert named_places(text) == places


def declaration(schema: dict[str, object]) -> wire.FunctionDeclaration:
    return wire.FunctionDeclaration(name="f", parameters_json_schema=schema)


@pytest.mark.parametrize(
    ("schema", "parameter"),
    [
        ({"properties": {"where": {"type": "string"}}, "required": ["where"]}, "where"),
        (
            {
                "properties": {"where": {"type": "STRING"}, "days": {"type": "integer"}},
                "required": ["where"],
            },
            "where",
        ),
        ({"properties": {"town": {"type": "string"}}}, "town"),
        ({"properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}, "city"),
        ({"properties": {"days": {"type": "integer"}}, "required": ["days"]}, None),
        (
            {
                "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                "required": ["a", "b"],
            },
            None,
        ),
        ({}, None),
    ],
)
def test_a_function_takes_a_place_through_its_one_string_parameter(
    schema: dict[str, object], parameter: str | None
) -> None:
    assert place_parameter(declaration(schema)) == parameter


async def test_any_function_with_one_required_string_is_called_per_place() -> None:
    def function(name: str, parameter: str) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name=name,
            parameters_json_schema={
                "type": "object",
                "properties": {parameter: {"type": "string"}, "limit": {"type": "integer"}},
                "required": [parameter],
            },
        )

    tools: list[types.ToolUnion] = [
        types.Tool(
            function_declarations=[
                function("find_hotels", "destination"),
                function("get_weather", "location"),
            ]
        )
    ]
    config = types.LiveConnectConfig(response_modalities=[types.Modality.TEXT], tools=tools)
    async with (
        Emulator() as emu,
        emu.client().aio.live.connect(model=MODEL, config=config) as session,
    ):
        await session.send_realtime_input(text="Reykjavik and Ulaanbaatar")
        calls = (await tool_call(session)).function_calls or []
        assert [(c.name, c.args) for c in calls] == [
            ("get_weather", {"location": "Reykjavik"}),
            ("find_hotels", {"destination": "Reykjavik"}),
            ("get_weather", {"location": "Ulaanbaatar"}),
            ("find_hotels", {"destination": "Ulaanbaatar"}),
        ]
        await session.send_tool_response(
            function_responses=[
                types.FunctionResponse(id=c.id, name=c.name, response={"output": "ok"})
                for c in calls
            ]
        )
        messages = await until_turn_complete(session)
    assert [m.text for m in messages if m.text] == [
        "Reykjavik: ok; Reykjavik: ok; Ulaanbaatar: ok; Ulaanbaatar: ok."
    ]
    assert emu.violations == []
