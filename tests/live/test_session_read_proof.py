"""The read proof through the real SDK and TLS: a message of answers and the ping that proves
the server read it leave the session in one write (one TLS record, one system call)."""

from __future__ import annotations

from typing import Any

import livebridge
from livebridge import LiveSession
from livebridge.emulator import Conversation, Emulator
from livebridge.protocol.events import TextOut
from tests.protocol.test_websocket import frames
from tests.support.gemini_sessions import collect_until, errors, open_session


async def test_answers_and_their_ping_leave_in_one_write() -> None:
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def lookup(city: str) -> str:
        """Look a city up."""
        return f"found {city}"

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids = await conv.tool_call([("lookup", {"city": "Oslo"}), ("lookup", {"city": "Rome"})])
        await conv.wait_answers(ids)
        await conv.say("found")
        await conv.turn_complete()

    writes: list[bytes] = []
    async with Emulator(scenario) as emu, open_session(emu, tools) as session:
        ws: Any = session._transport._ws  # type: ignore[union-attr]
        write = ws.transport.write

        def record(data: Any) -> None:
            writes.append(bytes(data))
            write(data)

        ws.transport.write = record
        await session.send_text("look Oslo and Rome up")
        await collect_until(session, lambda e: isinstance(e, TextOut) and e.text == "found")
        ws.transport.write = write

    # Frames are compressed (permessage-deflate), so the write is known by its ping.
    sent = [[opcode for opcode, _ in frames(data)] for data in writes]
    proving = [opcodes for opcodes in sent if 0x9 in opcodes]
    assert proving == [[0x1, 0x9]]  # the answers' text frame, then the ping, in one write
    assert errors(emu) == []


async def test_openai_outputs_and_their_ping_leave_in_one_write() -> None:
    """On OpenAI Realtime a message of answers is a frame per call: all of them and the ping
    go in one write, where each took a write (and a TLS record) of its own."""
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def lookup(city: str) -> str:
        """Look a city up."""
        return f"found {city}"

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids = await conv.tool_call([("lookup", {"city": "Oslo"}), ("lookup", {"city": "Rome"})])
        await conv.wait_answers(ids)
        await conv.say("found")
        await conv.turn_complete()

    writes: list[bytes] = []
    async with (
        Emulator(scenario, protocol="openai") as emu,
        LiveSession.connect(
            emu.openai_client(),
            model="gpt-realtime",
            tools=tools,
            config={"output_modalities": ["text"]},
        ) as session,
    ):
        ws: Any = session._transport._ws  # type: ignore[union-attr]
        write = ws.transport.write

        def record(data: Any) -> None:
            writes.append(bytes(data))
            write(data)

        ws.transport.write = record
        await session.send_text("look Oslo and Rome up")
        await collect_until(session, lambda e: isinstance(e, TextOut) and e.text == "found")
        ws.transport.write = write

    proving = [write for write in map(frames, writes) if 0x9 in (op for op, _ in write)]
    assert len(proving) == 1
    assert [opcode for opcode, _ in proving[0]] == [0x1, 0x1, 0x9]  # both outputs, the ping
    assert all(b"function_call_output" in payload for _, payload in proving[0][:2])
    assert errors(emu) == []
