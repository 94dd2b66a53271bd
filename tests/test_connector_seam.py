"""The connector seam: a session runs on any ``Connector``, e.g. one keeping handles elsewhere."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import livebridge
from livebridge import LiveSession
from livebridge.calls.tools import ToolRegistry
from livebridge.emulator import Conversation, Emulator
from livebridge.live.connectors import Connector
from livebridge.live.events import Resumed, TextOut
from livebridge.live.protocol import LiveProtocol, ProtocolOptions
from livebridge.live.transport import Transport
from livebridge.vendors.gemini.connector import GeminiConnector
from tests.session_helpers import MODEL, TEXT_CONFIG, collect_until


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
