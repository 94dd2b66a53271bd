"""The re-issue rule end to end: the real SDK, the emulator over TLS, a real LiveSession.

"Could the model have seen the first answer?" is decided by the ledger from what really went
over the socket: an answer is seen once a later server message arrives on its connection.
"""

from __future__ import annotations

import threading
import time

import anyio

import livebridge
from livebridge.emulator import Conversation, Emulator
from livebridge.protocol.events import SessionEvent, ToolCallSettled, TurnComplete
from tests.support.gemini_sessions import (
    client_messages,
    collect_until,
    errors,
    of_type,
    open_session,
)


def is_turn_complete(event: SessionEvent) -> bool:
    return isinstance(event, TurnComplete)


def coffee_tools(runs: list[str], seconds: float = 0.0) -> livebridge.ToolRegistry:
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def add_coffee(size: str, context: livebridge.CallContext) -> dict[str, int]:
        """Add a coffee to the order."""
        runs.append(context.call_id)
        await anyio.sleep(seconds)
        return {"coffees": len(runs)}

    return tools


async def test_one_more_coffee_after_the_answer_was_heard_runs_again() -> None:
    async def scenario(conv: Conversation) -> None:
        for reply in ("One coffee added.", "Two coffees now."):
            await conv.expect_turn()
            ids = await conv.tool_call([("add_coffee", {"size": "small"})])
            await conv.wait_answers(ids)
            await conv.say(reply)  # a server message after the answer: it was heard
            await conv.turn_complete()

    runs: list[str] = []
    async with Emulator(scenario) as emu, open_session(emu, coffee_tools(runs)) as session:
        await session.send_text("Add a small coffee.")
        events = await collect_until(session, is_turn_complete)
        await session.send_text("And one more coffee.")
        events += await collect_until(session, is_turn_complete)
    assert len(runs) == 2
    settled = of_type(events, ToolCallSettled)
    assert [e.outcome for e in settled] == ["ok", "ok"]
    outputs = [
        r["response"] for m in client_messages(emu, "toolResponse") for r in m["functionResponses"]
    ]
    assert outputs == [{"output": {"coffees": 1}}, {"output": {"coffees": 2}}]
    assert errors(emu) == []


async def test_a_call_repeated_before_its_answer_could_be_seen_runs_once() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        first = await conv.tool_call([("add_coffee", {"size": "large"})])
        again = await conv.tool_call([("add_coffee", {"size": "large"})])  # while it runs
        await conv.wait_answers(first + again)
        await conv.say("One large coffee added.")
        await conv.turn_complete()

    runs: list[str] = []
    tools = coffee_tools(runs, seconds=0.2)
    async with Emulator(scenario) as emu, open_session(emu, tools) as session:
        await session.send_text("Add a large coffee.")
        events = await collect_until(session, is_turn_complete)
    assert len(runs) == 1
    settled = {e.call_id: e.ending for e in of_type(events, ToolCallSettled)}
    assert sorted(settled.values()) == ["duplicate", "ok"]
    answers = [
        r["response"] for m in client_messages(emu, "toolResponse") for r in m["functionResponses"]
    ]
    assert answers == [{"output": {"coffees": 1}}] * 2
    assert errors(emu) == []


async def test_a_handler_that_swallows_cancellation_cannot_wedge_the_session() -> None:
    stop = threading.Event()
    tools = livebridge.ToolRegistry()

    @tools.tool(timeout=0.3)
    async def stubborn() -> str:
        """Never gives up."""
        while not stop.is_set():
            try:
                await anyio.sleep(0.01)
            except anyio.get_cancelled_exc_class():
                pass
        return "too late"

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids = await conv.tool_call([("stubborn", {})])
        await conv.wait_answers(ids)
        await conv.turn_complete()

    options = livebridge.SessionOptions(shutdown_grace=0.5)
    try:
        async with Emulator(scenario) as emu:
            async with open_session(emu, tools, options=options) as session:
                await session.send_text("Go.")
                events = await collect_until(session, is_turn_complete)
                leaving = time.monotonic()
            left_after = time.monotonic() - leaving
    finally:
        stop.set()
    assert [e.outcome for e in of_type(events, ToolCallSettled)] == ["timeout"]
    assert left_after < 0.5 + 1.0, left_after
    assert errors(emu) == []
