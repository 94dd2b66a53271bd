"""``livebridge.client_args()``: what a genai.Client built with it gives every Live websocket."""

from __future__ import annotations

import livebridge
from livebridge import LiveSession, ToolRegistry
from livebridge.emulator import Emulator
from livebridge.protocol.events import TextOut
from livebridge.protocol.transport import MAX_MESSAGE_BYTES
from tests.support.gemini_sessions import MODEL, TEXT_CONFIG, collect_until


async def test_sdk_default_negotiates_deflate_and_client_args_does_not(
    gemini_emulator: Emulator,
) -> None:
    async with gemini_emulator.client().aio.live.connect(
        model=MODEL, config=TEXT_CONFIG
    ) as default:
        assert [e.name for e in default._ws.protocol.extensions] == ["permessage-deflate"]
    tuned = gemini_emulator.client(async_client_args=livebridge.client_args())
    async with tuned.aio.live.connect(model=MODEL, config=TEXT_CONFIG) as session:
        ws = session._ws
        assert ws.protocol.extensions == []
        assert ws.protocol.max_message_size == MAX_MESSAGE_BYTES
        assert (ws.ping_interval, ws.ping_timeout) == (20.0, 60.0)


async def test_a_session_works_on_a_client_built_with_client_args() -> None:
    async with Emulator() as emu:
        client = emu.client(async_client_args=livebridge.client_args())
        async with LiveSession.connect(
            client, model=MODEL, tools=ToolRegistry(), config=TEXT_CONFIG
        ) as session:
            await session.send_text("hello")
            events = await collect_until(session, lambda e: isinstance(e, TextOut))
        assert isinstance(events[-1], TextOut)
        assert emu.violations == []
