"""What an open session keeps of its connection, through the real SDK and TLS: the TLS read
buffer at ``tls_read_buffer``, and nothing of the opening handshake."""

from __future__ import annotations

from typing import Any

import livebridge
from livebridge.emulator import Conversation, Emulator
from livebridge.protocol.events import TextOut
from livebridge.protocol.transport import TLS_READ_BUFFER
from tests.support.gemini_sessions import collect_until, errors, open_session


async def test_an_open_session_keeps_no_handshake_and_a_small_tls_buffer() -> None:
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def lookup(city: str) -> str:
        """Look a city up."""
        return f"found {city}"

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids = await conv.tool_call([("lookup", {"city": "Oslo"})])
        await conv.wait_answers(ids)
        await conv.say("found")
        await conv.turn_complete()

    async with Emulator(scenario) as emu, open_session(emu, tools) as session:
        ws: Any = session._transport._ws  # type: ignore[union-attr]
        # The handshake request (its headers, the API key among them) is let go once open.
        assert ws.request is None
        assert len(ws.transport._ssl_protocol._ssl_buffer) == TLS_READ_BUFFER
        await session.send_text("look Oslo up")  # and the session works as before
        await collect_until(session, lambda e: isinstance(e, TextOut) and e.text == "found")
    assert errors(emu) == []
