"""Odd frames from the server, through the real SDK and TLS: each call is judged on its own."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import msgspec

import livebridge
from livebridge.emulator import Conversation, Emulator
from livebridge.protocol.events import ToolCallSettled, TurnComplete
from tests.support.gemini_sessions import client_messages, collect_until, of_type, open_session


def lookup_tools() -> livebridge.ToolRegistry:
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def lookup(city: str) -> str:
        """Look a city up."""
        return f"found {city}"

    return tools


async def test_malformed_calls_are_answered_and_their_siblings_run() -> None:
    """Each call fails alone; one without a usable id is answered by name, as Vertex's are."""
    calls: list[dict[str, Any]] = [
        {"id": "good", "name": "lookup", "args": {"city": "Oslo"}},
        {"id": "not-object", "name": "lookup", "args": ["Oslo"]},
        {"id": 42, "name": "lookup", "args": {"city": "Rome"}},
        {"name": "lookup", "args": {"city": "Lima"}},
        {"id": "bad-name", "name": {"x": 1}, "args": {}},
    ]
    frame = msgspec.json.encode({"toolCall": {"functionCalls": calls}})
    deep = b'{"id":"deep","name":"lookup","args":' + b'{"a":' * 1000 + b"1" + b"}" * 1001
    frame = frame[:-3] + b"," + deep + b"]}}"

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.send_raw(frame)
        await conv.expect_turn(timeout=30)

    async with Emulator(scenario) as emu, open_session(emu, lookup_tools()) as session:
        await session.send_text("go")
        events = await collect_until(
            session, lambda e: isinstance(e, ToolCallSettled) and e.call_id == "deep"
        )
    fates = {e.call_id: e.ending for e in of_type(events, ToolCallSettled)}
    assert fates == {
        "good": "ok",
        "not-object": "rejected",
        "nameless-call-1": "ok",
        "nameless-call-2": "ok",
        "bad-name": "rejected",
        "deep": "rejected",
    }
    (message,) = client_messages(emu, "toolResponse")
    answers = {r.get("id"): r["response"] for r in message["functionResponses"]}
    assert answers["good"] == {"output": "found Oslo"}
    assert answers["not-object"]["error"]["type"] == "invalid_arguments"
    assert answers["bad-name"]["error"]["type"] == "unknown_function"
    assert answers["deep"]["error"]["type"] == "invalid_arguments"
    by_name = [r["response"] for r in message["functionResponses"] if "id" not in r]
    assert by_name == [{"output": "found Rome"}, {"output": "found Lima"}]  # in call order


async def test_the_sdk_transport_answers_a_call_without_an_id_by_name() -> None:
    """The SDK refuses an answer without an id on the Developer API; the call gets it anyway."""
    frame = b'{"toolCall": {"functionCalls": [{"name": "lookup", "args": {"city": "Lima"}}]}}'

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.send_raw(frame)
        await conv.expect_turn(timeout=30)

    options = livebridge.SessionOptions(transport="sdk")
    async with (
        Emulator(scenario) as emu,
        open_session(emu, lookup_tools(), options=options) as session,
    ):
        await session.send_text("go")
        events = await collect_until(session, lambda e: isinstance(e, ToolCallSettled))
        await session.send_text("still here?")
    assert [(e.call_id, e.ending) for e in of_type(events, ToolCallSettled)] == [
        ("nameless-call-1", "ok")
    ]
    (message,) = client_messages(emu, "toolResponse")
    assert message["functionResponses"] == [
        {"name": "lookup", "response": {"output": "found Lima"}}
    ]


async def test_a_snake_case_frame_is_understood() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.send_raw(
            b'{"server_content": {"turn_complete": true, "turn_complete_reason": "X"}}'
        )
        await conv.expect_turn(timeout=30)

    async with Emulator(scenario) as emu, open_session(emu, lookup_tools()) as session:
        await session.send_text("go")
        events = await collect_until(session, lambda e: isinstance(e, TurnComplete))
    assert of_type(events, TurnComplete) == [TurnComplete(None, "X")]


async def test_a_non_blocking_answer_goes_out_while_its_batch_still_runs() -> None:
    release = threading.Event()  # the emulator runs its own event loop in another thread
    tools = livebridge.ToolRegistry()

    @tools.tool(behavior="NON_BLOCKING")
    async def quick() -> str:
        """Answers at once."""
        return "quick"

    @tools.tool(behavior="NON_BLOCKING")
    async def slow() -> str:
        """Answers once the server saw the quick answer."""
        await anyio.to_thread.run_sync(release.wait, 30)
        return "slow"

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        quick_id, slow_id = await conv.tool_call([("quick", {}), ("slow", {})])
        await conv.wait_answers([quick_id])  # would wait forever if answers waited for the batch
        release.set()
        await conv.wait_answers([slow_id])
        await conv.turn_complete()

    async with Emulator(scenario) as emu, open_session(emu, tools) as session:
        await session.send_text("go")
        events = await collect_until(session, lambda e: isinstance(e, TurnComplete))
    assert [e.name for e in of_type(events, ToolCallSettled)] == ["quick", "slow"]
    assert len(client_messages(emu, "toolResponse")) == 2
