"""The connector seam: a session runs on any ``Connector``, e.g. one keeping handles elsewhere;
every vendor's connector keeps its client's API key out of the logs."""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

import pytest
from google import genai
from google.genai import types

import livebridge
from livebridge import LiveSession
from livebridge.calls.tools import ToolRegistry
from livebridge.emulator import Conversation, Emulator
from livebridge.protocol.actions import ProtocolOptions
from livebridge.protocol.base import Connector, LiveProtocol
from livebridge.protocol.events import Resumed, TextOut, TurnComplete
from livebridge.protocol.transport import Transport
from livebridge.vendors.gemini.connector import GeminiConnector
from tests.support.gemini_sessions import MODEL, TEXT_CONFIG, collect_until


class HandleLog:
    """Wraps a connector and records every handle it is asked to resume (a handle store's hook)."""

    def __init__(self, inner: Connector) -> None:
        self.inner = inner
        self.opened: list[str | None] = []

    def protocol(
        self, tools: ToolRegistry, options: ProtocolOptions, *, observed: bool
    ) -> LiveProtocol:
        return self.inner.protocol(tools, options, observed=observed)

    @asynccontextmanager
    async def open(self, handle: str | None) -> AsyncIterator[Transport]:
        self.opened.append(handle)
        async with self.inner.open(handle) as transport:
            yield transport


async def test_a_wrapping_connector_sees_every_resumption_handle() -> None:
    async def scenario(conv: Conversation) -> None:
        if conv.resumed_from is not None:
            await conv.say("resumed")
            await conv.turn_complete()
            return
        await conv.expect_turn()
        issued.append(await conv.resumption_update())
        await conv.go_away("0s")
        await conv.expect_turn(timeout=30)

    issued: list[str | None] = []
    tools = livebridge.ToolRegistry()
    async with Emulator(scenario) as emu:
        inner = GeminiConnector(emu.client(), model=MODEL, tools=tools, config=TEXT_CONFIG)
        connector = HandleLog(inner)
        async with LiveSession.connect(tools=tools, connector=connector) as session:
            await session.send_text("hello")
            events = await collect_until(session, lambda e: isinstance(e, TextOut))
    assert [e.reason for e in events if isinstance(e, Resumed)] == ["go_away"]
    assert issued[0] is not None
    assert connector.opened == [None, issued[0]]
    assert events[-1] == TextOut("resumed")


@dataclass(frozen=True, slots=True)
class Keyed:
    """How one vendor's client is given an API key, and the handshake header that carries it."""

    protocol: Literal["gemini", "openai"]
    key: str
    client: Callable[[Emulator, str], Any]
    model: str
    config: Any
    header: str


def _gemini_client(emu: Emulator, key: str) -> genai.Client:
    trust = ssl.create_default_context(cafile=emu.ca_file)
    options = types.HttpOptions(base_url=emu.base_url, async_client_args={"ssl": trust})
    return genai.Client(api_key=key, http_options=options)


KEYED = [
    Keyed(
        "gemini",
        "AIzaSyRECOGNIZABLE-livebridge-test-key-0123456789",
        _gemini_client,
        MODEL,
        TEXT_CONFIG,
        "x-goog-api-key",
    ),
    Keyed(
        "openai",
        "sk-livebridge-secret-4821",
        lambda emu, key: emu.openai_client(api_key=key),
        "gpt-realtime",
        {"output_modalities": ["text"]},
        "authorization",
    ),
]


@pytest.mark.parametrize("vendor", KEYED, ids=[v.protocol for v in KEYED])
async def test_the_api_key_never_appears_in_a_log_line(
    vendor: Keyed, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, the websockets client's included
    async with Emulator(protocol=vendor.protocol) as emu:
        client = vendor.client(emu, vendor.key)
        async with LiveSession.connect(
            client, model=vendor.model, tools=livebridge.ToolRegistry(), config=vendor.config
        ) as session:
            await session.send_text("hello")
            await collect_until(session, lambda e: isinstance(e, TurnComplete))
    lines = [record.getMessage() for record in caplog.records]
    assert any(vendor.header in line.lower() for line in lines)  # the header was logged...
    assert not [line for line in lines if vendor.key in line]  # ...without the key


@pytest.mark.parametrize("field", ["attach", "delegate"])
@pytest.mark.parametrize("model", [MODEL, "gpt-realtime-2"])
async def test_a_gpt_live_option_on_another_vendor_is_a_usage_error_naming_it(
    field: str, model: str
) -> None:
    """``attach`` and ``delegate`` are GPT-Live's: on a Gemini or Realtime session they are
    refused before any socket, naming the field and the vendor that takes it."""
    import openai

    client: Any = (
        genai.Client(api_key="k")
        if model == MODEL
        else openai.AsyncOpenAI(api_key="k", base_url="https://127.0.0.1:9/v1")
    )
    value: Any = "live_123" if field == "attach" else (lambda delegation: "ok")
    options = livebridge.SessionOptions(**{field: value})
    with pytest.raises(livebridge.UsageError, match=f"SessionOptions.{field} is for GPT-Live"):
        LiveSession(client, model=model, tools=ToolRegistry(), options=options)
