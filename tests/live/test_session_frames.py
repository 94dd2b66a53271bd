"""Answer frames stay within ``max_frame_bytes`` however many calls one turn carries, through
the real SDK and TLS to the emulator (which closes 1007 on a frame over 1 MiB, as the service
does)."""

from __future__ import annotations

from collections import Counter

import msgspec

import livebridge
from livebridge.emulator import Conversation, Emulator
from livebridge.protocol.events import Closed, ToolCallSettled, TurnComplete
from tests.support.gemini_sessions import (
    client_messages,
    collect_until,
    errors,
    of_type,
    open_session,
)

_encode = msgspec.json.Encoder().encode


def lookup_tools() -> livebridge.ToolRegistry:
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def lookup(city: str) -> str:
        """Look a city up."""
        return f"found {city}"

    return tools


async def test_five_thousand_calls_in_one_turn_are_each_answered_within_the_frame_limit() -> None:
    """The ``fanout_limit`` rejections count against the frame budget like any answer; a
    BLOCKING batch too large for one frame goes out over several, in call order."""
    count = 5000
    calls = [("lookup", {"city": f"city-{i}"}) for i in range(count)]
    ids: list[str] = []

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids.extend(await conv.tool_call(calls))
        await conv.wait_answers(ids, timeout=60)
        await conv.turn_complete()
        await conv.expect_turn(timeout=60)

    # The 5,000 fates come in one burst: room for every one of them among the events.
    options = livebridge.SessionOptions(settled_capacity=count)
    async with (
        Emulator(scenario) as emu,
        open_session(emu, lookup_tools(), options=options) as session,
    ):
        await session.send_text("go")
        events = await collect_until(
            session, lambda e: isinstance(e, TurnComplete | Closed), timeout=120
        )
    settled = of_type(events, ToolCallSettled)
    assert of_type(events, Closed) == []
    assert Counter(Counter(e.call_id for e in settled).values()) == {1: count}
    assert Counter(e.outcome for e in settled) == {"ok": 16, "rejected": count - 16}
    messages = client_messages(emu, "toolResponse")
    answered = [r["id"] for m in messages for r in m["functionResponses"]]
    assert answered == ids  # each once on the wire, in call order
    sizes = [len(_encode({"toolResponse": m})) for m in messages]
    limit = livebridge.CallPolicy().max_frame_bytes
    assert len(sizes) > 1 and max(sizes) <= limit, sizes
    print(f"{count} calls: {len(sizes)} frames, largest {max(sizes)} bytes")
    assert [e for e in errors(emu) if "1007" in e or "frame" in e] == []
