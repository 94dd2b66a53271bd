"""The writer wakes for work only: a turn of calls that suspend costs it one look for their
answers (and one more that finds nothing), not a look when the calls start nor when their batch
ends. Each needless look is a pass of the event loop on the turn's critical path."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import livebridge
from livebridge.emulator import Conversation, Emulator
from livebridge.protocol.events import TextOut, ToolCallStarted
from livebridge.vendors.gemini.protocol import GeminiLiveProtocol
from tests.support.gemini_sessions import collect_until, errors, open_session


async def test_a_turn_of_suspended_calls_wakes_the_writer_for_its_answers_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release = asyncio.Event()
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def lookup(city: str) -> str:
        """Look a city up."""
        await release.wait()
        return f"found {city}"

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.say("ready")
        ids = await conv.tool_call([("lookup", {"city": "Oslo"}), ("lookup", {"city": "Rome"})])
        await conv.say("go")
        await conv.wait_answers(ids)
        await conv.say("found")

    looks = 0
    next_item = GeminiLiveProtocol.next_item

    def counted(self: GeminiLiveProtocol, now: float) -> Any:
        nonlocal looks
        looks += 1
        return next_item(self, now)

    monkeypatch.setattr(GeminiLiveProtocol, "next_item", counted)
    async with Emulator(scenario) as emu, open_session(emu, tools) as session:
        await session.send_text("look Oslo and Rome up")
        await collect_until(session, lambda e: isinstance(e, TextOut) and e.text == "ready")
        before = looks  # the writer sent the text and is waiting
        seen = await collect_until(session, lambda e: isinstance(e, TextOut) and e.text == "go")
        assert sum(isinstance(e, ToolCallStarted) for e in seen) == 2
        release.set()
        await collect_until(session, lambda e: isinstance(e, TextOut) and e.text == "found")
        assert looks - before == 2  # the answers, then nothing: it waits again
    assert errors(emu) == []
