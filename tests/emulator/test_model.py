"""The default model: the places it knows, any function taking one string, ticker symbols."""

from __future__ import annotations

import pytest
from google.genai import types
from hypothesis import given, settings
from hypothesis import strategies as st

from livebridge.emulator import Emulator, RuleModel
from livebridge.emulator.model import named_places, place_parameter, ticker_symbols
from livebridge.emulator.places import PLACES
from livebridge.vendors.gemini import wire
from tests.support.gemini_clients import MODEL, tool_call, until_turn_complete
from tests.support.hypothesis_profiles import examples

_letters = st.text(alphabet="abcdefghijklmnopqrstuvwxyzäéøüß", min_size=2, max_size=10)
#: Places a scenario adds: made-up capitalised words the shipped list does not hold.
_made_up = st.builds(
    lambda first, rest: first + rest, st.sampled_from("ABCDEFGHIJKLMNOPRSTUVWÅÉÜ"), _letters
).filter(lambda word: word.casefold() not in {p.casefold() for p in PLACES})
_place = st.one_of(st.sampled_from(sorted(PLACES)), _made_up)
_templates = st.sampled_from(
    [
        "weather in {} and in {}",
        "{} and {}",
        "What's the weather in {}, and {}?",
        "Is it raining in {} today? And in {} tomorrow?",
        "I'm flying from {} to {} on Friday.",
        "Trains between {} and {}?",
        "{}, then {}.",
    ]
)


@settings(max_examples=examples(300), deadline=None)
@given(_templates, st.lists(_place, min_size=2, max_size=2, unique_by=str.casefold))
def test_every_known_or_added_place_is_found_in_order(template: str, places: list[str]) -> None:
    added = [p for p in places if p not in PLACES]
    assert named_places(template.format(*places), added) == places
    assert named_places(template.format(*places)) == [p for p in places if p in PLACES]


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
        # Sentence openers are never places: only names the model knows are.
        ("Trains between Oslo and Lisbon?", ["Oslo", "Lisbon"]),
        ("Price of ACME and GLOBEX?", []),
        ("Weather in Paris and Rome, and book Chez Janou for 4?", ["Paris", "Rome"]),
        (
            "Flights to Bosnia and Herzegovina or Trinidad and Tobago",
            ["Bosnia and Herzegovina", "Trinidad and Tobago"],
        ),
        ("Add a large coffee.", []),
    ],
)
def test_named_places(text: str, places: list[str]) -> None:
    assert named_places(text) == places


def test_ticker_symbols_are_all_capitals_words_only() -> None:
    assert ticker_symbols("Price of ACME and GLOBEX?") == ["ACME", "GLOBEX"]
    assert ticker_symbols("And BRK.B, then Acme and I") == ["BRK.B"]


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


async def test_a_symbol_parameter_takes_tickers_and_a_scenario_adds_places() -> None:
    def function(name: str, parameter: str) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name=name,
            parameters_json_schema={
                "type": "object",
                "properties": {parameter: {"type": "string"}},
                "required": [parameter],
            },
        )

    tools: list[types.ToolUnion] = [
        types.Tool(function_declarations=[function("get_price", "symbol")])
    ]
    config = types.LiveConnectConfig(response_modalities=[types.Modality.TEXT], tools=tools)
    async with (
        Emulator(RuleModel(places=["Narnia"])) as emu,
        emu.client().aio.live.connect(model=MODEL, config=config) as session,
    ):
        await session.send_realtime_input(text="Price of ACME and GLOBEX?")
        calls = (await tool_call(session)).function_calls or []
        assert [(c.name, c.args) for c in calls] == [
            ("get_price", {"symbol": "ACME"}),
            ("get_price", {"symbol": "GLOBEX"}),
        ]
    assert named_places("Trains to Narnia", RuleModel(places=["Narnia"]).places) == ["Narnia"]
