"""The Gemini connector and the emulator: redaction of secrets, oversized frames named."""

from __future__ import annotations

import socket

import pytest
from google import genai
from google.genai import types

import livebridge
from livebridge import FrameTooLargeError, LiveSession
from livebridge.emulator import Conversation, Emulator
from livebridge.errors import TransportClosed
from livebridge.protocol.events import Resumed, TextOut, TurnComplete
from livebridge.protocol.secrets import RedactingFilter
from livebridge.vendors.gemini.connector import GeminiConnector
from tests.support.gemini_sessions import MODEL, TEXT_CONFIG, collect_until, open_session


def test_redaction_covers_headers_query_strings_and_known_secrets() -> None:
    redactor = RedactingFilter()
    redactor.add("s3cret-value")
    text = "> x-goog-api-key: AIzaXYZ\n GET /ws?key=AIzaABC&alt=json token s3cret-value"
    redacted = redactor.redact(text)
    assert "AIzaXYZ" not in redacted
    assert "AIzaABC" not in redacted
    assert "s3cret-value" not in redacted
    assert "alt=json" in redacted


async def test_a_frame_over_the_client_limit_is_named_and_the_session_resumes() -> None:
    async def scenario(conv: Conversation) -> None:
        if conv.resumed_from is not None:
            await conv.say("back")
            await conv.turn_complete()
            return
        await conv.expect_turn()
        await conv.resumption_update()
        await conv.say("x" * 20_000)  # over the 8 KB limit below
        await conv.expect_turn(timeout=30)

    async with Emulator(scenario) as emu:
        limited = emu.client(async_client_args={"max_size": 8_192, "compression": None})
        async with LiveSession.connect(
            limited, model=MODEL, tools=livebridge.ToolRegistry(), config=TEXT_CONFIG
        ) as session:
            await session.send_text("hello")
            events = await collect_until(session, lambda e: isinstance(e, TextOut))
    (resumed,) = [e for e in events if isinstance(e, Resumed)]
    assert resumed.reason == "frame_too_large"
    assert isinstance(resumed.error, FrameTooLargeError)
    assert resumed.error.limit == 8_192
    assert resumed.error.size is not None and resumed.error.size > 8_192
    assert events[-1] == TextOut("back")


async def test_open_session_helper_still_uses_the_default_connector(
    gemini_emulator: Emulator,
) -> None:
    async with open_session(gemini_emulator, livebridge.ToolRegistry()) as session:
        await session.send_text("hi")
        await collect_until(session, lambda e: isinstance(e, TurnComplete))


async def test_every_way_a_connection_fails_or_ends_is_transport_closed() -> None:
    async with Emulator(models=[MODEL]) as emu:
        tools = livebridge.ToolRegistry()
        wrong = GeminiConnector(emu.client(), model="nope", tools=tools, config=TEXT_CONFIG)
        with pytest.raises(TransportClosed) as refused:
            async with wrong.open(None):
                pytest.fail("a wrong model must not connect")
        assert refused.value.code is not None and "model" in refused.value.reason

        connector = GeminiConnector(emu.client(), model=MODEL, tools=tools, config=TEXT_CONFIG)
        with pytest.raises(TransportClosed, match="network error: reset"):
            async with connector.open(None):
                raise ConnectionResetError("reset")
        ended = TransportClosed(1011, "ended by the reader")
        with pytest.raises(TransportClosed) as passed:
            async with connector.open(None):
                raise ended
        assert passed.value is ended
        async with connector.open(None) as transport:  # the connector still connects
            assert transport.session_id

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    options = types.HttpOptions(base_url=f"https://127.0.0.1:{port}")
    nowhere = GeminiConnector(
        genai.Client(api_key="test", http_options=options), model=MODEL, tools=tools
    )
    with pytest.raises(TransportClosed, match="network error"):
        async with nowhere.open(None):
            pytest.fail("nothing listens there")


async def test_connections_resume_with_their_handle_and_leave_the_app_config_alone() -> None:
    config = types.LiveConnectConfig(response_modalities=[types.Modality.TEXT])
    issued: list[str | None] = []

    async def scenario(conv: Conversation) -> None:
        if conv.resumed_from is not None:
            await conv.say(f"resumed {conv.resumed_from}")
            await conv.turn_complete()
            return
        await conv.expect_turn()
        issued.append(await conv.resumption_update())
        conv.session.abort()

    async with (
        Emulator(scenario) as emu,
        LiveSession.connect(
            emu.client(), model=MODEL, tools=livebridge.ToolRegistry(), config=config
        ) as session,
    ):
        await session.send_text("hello")
        events = await collect_until(session, lambda e: isinstance(e, TextOut))
    (handle,) = issued
    assert handle is not None and events[-1] == TextOut(f"resumed {handle}")
    assert config.session_resumption is None and config.tools is None
