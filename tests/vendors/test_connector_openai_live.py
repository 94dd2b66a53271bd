"""Connecting to GPT-Live: the model name selects it, and a config the strict session schema
refuses is a ``UsageError`` naming the culprit before any socket opens."""

from __future__ import annotations

from typing import Any

import pytest

import livebridge
from livebridge import LiveSession, UsageError
from livebridge.emulator import Emulator, LiveServerSession
from livebridge.live.vendors import connector_for
from livebridge.vendors.openai_live.connector import GptLiveConnector
from tests.support.gpt_live_sessions import MODEL, open_live, sent


def weather() -> livebridge.ToolRegistry:
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def get_weather(city: str) -> str:
        """Weather for a city."""
        return "sunny"

    return tools


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"turn_detection": {"type": "server_vad"}}, "turn_detection"),
        ({"tools": []}, "tools"),
        ({"delegation": {"type": "realtime"}}, "'realtime'"),
        ({"delegation": {"type": "responses", "responses": {"temperature": 0.2}}}, "temperature"),
        (
            {
                "delegation": {
                    "type": "responses",
                    "responses": {"tools": [{"type": "function", "name": "get_weather"}]},
                }
            },
            "get_weather",
        ),
        ({"audio": {"format": {"type": "audio/pcm", "rate": 44100}}}, "44100"),
        ({"model": "gpt-live-1"}, "gpt-live-1"),
    ],
)
async def test_a_refused_config_fails_before_any_socket(config: dict[str, Any], named: str) -> None:
    async with Emulator(model=MODEL) as emu:
        with pytest.raises(UsageError, match=named):
            async with LiveSession.connect(
                emu.client(), model=MODEL, tools=weather(), config=config
            ):
                pass
        assert emu.live is not None
        assert emu.live.sessions == []


def test_the_model_name_selects_gpt_live() -> None:
    import openai

    client = openai.AsyncOpenAI(api_key="test", base_url="https://127.0.0.1:9/v1")
    connector = connector_for(client, model="gpt-live-1.1", tools=weather())
    assert isinstance(connector, GptLiveConnector)
    responses = connector.session["delegation"]["responses"]
    assert responses["model"] == "gpt-5.6-luna"
    assert [tool["name"] for tool in responses["tools"]] == ["get_weather"]
    assert connector.profile.backend_bytes == 32_768
    realtime = connector_for(client, model="gpt-realtime-2", tools=weather())
    assert not isinstance(realtime, GptLiveConnector)


async def test_nothing_is_sent_before_session_started() -> None:
    """The emulator refuses any command before ``session.start`` is answered; the session
    opens cleanly and its first command is ``session.start``."""

    async def scenario(live: LiveServerSession) -> None:
        await live.wait_until(lambda: live.started)

    async with Emulator(scenario, model=MODEL) as emu, open_live(emu, weather()) as session:
        await session.send_audio(b"\0\0" * 2400)
        assert emu.live is not None
        live = emu.live.sessions[0]
        await emu.wait_for(lambda: len(live.received) >= 2)
    first = [entry.message["type"] for entry in emu.transcript if entry.direction == "client"]
    assert first[0] == "session.start"
    assert first[1] == "session.input_audio.append"
    assert live.verdicts == []
    assert sent(emu, "session.start")[0]["session"]["model"] == MODEL


async def test_the_service_refusing_the_session_fails_the_connect(
    gpt_live_emulator: Emulator,
) -> None:
    """What only the service refuses (a voice it does not serve) comes back as its error and
    fails the connect, naming the parameter."""
    config = {"audio": {"output": {"voice": "fable"}}}
    with pytest.raises(livebridge.LivebridgeError, match=r"audio\.output\.voice"):
        async with LiveSession.connect(
            gpt_live_emulator.client(), model=MODEL, tools=weather(), config=config
        ):
            pass
