"""The OpenAI connector: picked by the client's type, clear errors at connect, both transports."""

from __future__ import annotations

import json
import subprocess
import sys

import openai
import pytest
from google import genai
from openai.types.realtime import RealtimeSessionCreateRequest

import livebridge
from livebridge import LiveSession
from livebridge.emulator import Conversation, Emulator
from livebridge.errors import LiveSessionError, ModelNotFoundError, UsageError
from livebridge.live.vendors import connector_for, vendor_of
from livebridge.protocol.events import ToolCallSettled, TurnComplete
from livebridge.vendors.gemini.connector import GeminiConnector
from livebridge.vendors.openai.connector import OpenAIConnector, session_config
from tests.support.gemini_sessions import collect_until, errors, of_type

MODEL = "gpt-realtime"
#: Connectors redact their client's key from every log line and recording of the process: a key
#: that is a common word would blank it out of other tests' output.
FAKE_KEY = "sk-livebridge-connector-choice-7315"


def registry() -> livebridge.ToolRegistry:
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def get_weather(city: str) -> str:
        """Weather for a city."""
        return f"{city}: sunny"

    return tools


def test_the_connector_follows_the_client_type() -> None:
    tools = registry()
    gemini = connector_for(genai.Client(api_key=FAKE_KEY), model="m", tools=tools)
    assert isinstance(gemini, GeminiConnector)
    realtime = connector_for(openai.AsyncOpenAI(api_key=FAKE_KEY), model=MODEL, tools=tools)
    assert isinstance(realtime, OpenAIConnector)
    with pytest.raises(UsageError, match=r"openai.AsyncOpenAI, not openai.OpenAI"):
        vendor_of(openai.OpenAI(api_key=FAKE_KEY))
    with pytest.raises(UsageError, match=r"cannot tell the vendor of a builtins.object"):
        connector_for(object(), model="m", tools=tools)
    with pytest.raises(UsageError, match="dict of session fields"):
        connector_for(openai.AsyncOpenAI(api_key=FAKE_KEY), model=MODEL, tools=tools, config=[1])


def test_session_config_merges_the_apps_fields_and_declares_the_tools() -> None:
    config = {"instructions": "be brief", "audio": {"output": {"voice": "marin"}}}
    session = session_config(config, registry())
    assert session["type"] == "realtime" and session["instructions"] == "be brief"
    assert session["audio"]["output"] == {
        "format": {"type": "audio/pcm", "rate": 24_000},
        "voice": "marin",
    }
    (tool,) = session["tools"]
    assert tool["type"] == "function" and tool["name"] == "get_weather"
    assert tool["description"] == "Weather for a city."
    assert tool["parameters"]["required"] == ["city"]
    with pytest.raises(UsageError, match="type 'realtime'"):
        session_config({"type": "transcription"}, registry())
    with pytest.raises(UsageError, match="audio/pcm at 24000 Hz or audio/pcmu"):
        session_config({"audio": {"input": {"format": {"type": "audio/pcma"}}}}, registry())
    phone = session_config({"audio": {"input": {"format": {"type": "audio/pcmu"}}}}, registry())
    assert phone["audio"]["input"]["format"] == {"type": "audio/pcmu"}  # no PCM rate left
    assert phone["audio"]["output"]["format"] == {"type": "audio/pcm", "rate": 24_000}


@pytest.mark.parametrize(
    ("model", "parallel"),
    [("gpt-realtime-2", True), ("gpt-realtime-2-2026-05-01", True), ("gpt-realtime", None)],
)
def test_parallel_tool_calls_is_stated_for_the_models_that_take_it(
    model: str, parallel: bool | None
) -> None:
    connector = OpenAIConnector(openai.AsyncOpenAI(api_key=FAKE_KEY), model=model, tools=registry())
    takes_it = connector.profile.parallel_tool_calls
    session = session_config(None, registry(), parallel_tool_calls=takes_it)
    assert session.get("parallel_tool_calls") is parallel
    typed = RealtimeSessionCreateRequest.model_validate(session)  # the SDK's name and place
    assert typed.parallel_tool_calls is parallel
    chosen = session_config({"parallel_tool_calls": False}, registry(), parallel_tool_calls=True)
    assert chosen["parallel_tool_calls"] is False  # the app's word wins


async def test_a_wrong_model_fails_the_connect_with_a_clear_error() -> None:
    async with Emulator(protocol="openai", models=[MODEL]) as emu:
        with pytest.raises(ModelNotFoundError, match=r"'gpt-x' does not exist.*model name"):
            async with LiveSession.connect(emu.openai_client(), model="gpt-x", tools=registry()):
                pass


async def test_an_unreachable_service_fails_the_connect_with_a_clear_error() -> None:
    client = openai.AsyncOpenAI(api_key=FAKE_KEY, base_url="https://127.0.0.1:1/v1")  # no one
    with pytest.raises(livebridge.ConnectionLostError, match=r"Could not open.*OPENAI_BASE_URL"):
        async with LiveSession.connect(client, model=MODEL, tools=registry()):
            pass


async def test_a_refused_session_config_fails_the_connect_and_says_what_was_wrong(
    openai_emulator: Emulator,
) -> None:
    config = {"output_modalities": ["smell"]}
    with pytest.raises(LiveSessionError, match=r"'smell'.*config given to LiveSession"):
        async with LiveSession.connect(
            openai_emulator.openai_client(), model=MODEL, tools=registry(), config=config
        ):
            pass


async def test_the_sdk_transport_answers_calls_like_the_wire_one() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids = await conv.tool_call([("get_weather", {"city": "Bern"})])
        await conv.wait_answers(ids, timeout=30)
        await conv.say("ok")
        await conv.turn_complete()

    options = livebridge.SessionOptions(transport="sdk")
    async with (
        Emulator(scenario, protocol="openai") as emu,
        LiveSession.connect(
            emu.openai_client(),
            model=MODEL,
            tools=registry(),
            config={"output_modalities": ["text"]},
            options=options,
        ) as session,
    ):
        await session.send_text("weather in Bern")
        events = await collect_until(session, lambda e: isinstance(e, TurnComplete))
    assert [e.outcome for e in of_type(events, ToolCallSettled)] == ["ok"]
    sent = [
        e.message["item"]
        for e in emu.transcript
        if e.direction == "client" and e.message.get("type") == "conversation.item.create"
    ]
    assert json.loads(sent[-1]["output"]) == {"output": "Bern: sunny"}
    assert errors(emu) == []


def test_the_shell_loads_no_sdk_until_a_client_needs_one() -> None:
    code = (
        "import sys, livebridge.live.session, livebridge.live.vendors\n"
        "import livebridge.protocol.actions\n"
        "print(sorted(m for m in ('openai', 'google.genai') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"
