"""The read proof through the real SDK and TLS: a message of answers and the ping that proves
the server read it leave the session in one write (one TLS record, one system call); answers
sent while a ping is out get a ping of their own as soon as its pong is back."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import livebridge
from livebridge import LiveSession
from livebridge.emulator import Conversation, Emulator
from livebridge.protocol.events import SessionEvent, TextOut, ToolCallSettled
from livebridge.protocol.websocket import ping_behind, send_and_ping
from livebridge.vendors.gemini import connector
from livebridge.vendors.gemini.connector import WireTransport
from tests.protocol.test_websocket import frames
from tests.support.gemini_sessions import collect_until, errors, open_session
from tests.support.timing import seconds


def lookup_tools() -> livebridge.ToolRegistry:
    """One tool that answers at once."""
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def lookup(city: str) -> str:
        """Look a city up."""
        return f"found {city}"

    return tools


async def test_answers_and_their_ping_leave_in_one_write() -> None:
    tools = lookup_tools()

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
    tools = lookup_tools()

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


async def test_answers_sent_while_a_ping_is_out_get_their_own_as_soon_as_its_pong_is_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The first answer's pong is held: the second answer goes while it is out, owing a ping.
    # Once the pong is back, that ping goes at once, before any other server message.
    tools = lookup_tools()

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        for city in ("Oslo", "Rome"):
            ids = await conv.tool_call([("lookup", {"city": city})])
            await conv.wait_answers(ids)
        await conv.expect_turn()  # only once the owed ping went
        await conv.say("found")
        await conv.turn_complete()

    held: asyncio.Future[Any] | None = None
    release = asyncio.Event()
    pings = asyncio.Event()

    async def holding(ws: Any, frames: Any) -> asyncio.Future[Any]:
        nonlocal held
        pong = await send_and_ping(ws, frames)
        if held is not None:
            return pong
        held = asyncio.get_running_loop().create_future()

        async def hand_over(outer: asyncio.Future[Any]) -> None:
            await release.wait()
            outer.set_result(await pong)

        asyncio.get_running_loop().create_task(hand_over(held))
        return held

    async def counted(self: WireTransport) -> asyncio.Future[Any]:
        pong = await ping_behind(self._ws)
        pings.set()
        return pong

    monkeypatch.setattr(connector, "send_and_ping", holding)
    monkeypatch.setattr(WireTransport, "ping_behind", counted)
    async with Emulator(scenario) as emu, open_session(emu, tools) as session:
        await session.send_text("look Oslo and Rome up")
        answered: list[str] = []

        def second_answer(event: SessionEvent) -> bool:
            if isinstance(event, ToolCallSettled):
                answered.append(event.call_id)
            return len(answered) == 2

        await collect_until(session, second_answer)
        assert not pings.is_set()  # owed, while the first pong is out
        release.set()
        await asyncio.wait_for(pings.wait(), seconds(10))
        await session.send_text("thanks")
        await collect_until(session, lambda e: isinstance(e, TextOut) and e.text == "found")
    assert errors(emu) == []
