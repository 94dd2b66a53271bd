"""Reading one exchange: a late NON_BLOCKING answer's reply belongs to the question that caused
it, not to the next one."""

from __future__ import annotations

from typing import Any

import anyio

from livebridge import ToolRegistry
from livebridge.emulator import Emulator
from livebridge.emulator.scenario import Conversation
from livebridge.live.exchange import ExchangeTracker
from livebridge.protocol.events import (
    AudioOut,
    Closed,
    SessionEvent,
    TextOut,
    ToolCallSettled,
    ToolCallStarted,
    TurnComplete,
)
from tests.support.gemini_sessions import of_type, open_session
from tests.support.timing import seconds


def registry(gate: anyio.Event | None = None) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool
    async def get_weather(city: str) -> dict[str, Any]:
        """Weather in a city."""
        return {"city": city, "sky": "sunny"}

    @tools.tool(behavior="NON_BLOCKING", scheduling="WHEN_IDLE")
    async def book_table(restaurant: str) -> dict[str, Any]:
        """Book a table."""
        if gate is not None:
            await gate.wait()
        return {"restaurant": restaurant, "reference": "JN-4821"}

    @tools.tool(behavior="NON_BLOCKING", scheduling="SILENT")
    async def note(text: str) -> str:
        """Take a note."""
        return "noted"

    return tools


def started(call_id: str, name: str, behavior: str = "BLOCKING") -> ToolCallStarted:
    return ToolCallStarted(call_id, name, {}, behavior)  # type: ignore[arg-type]


def settled(call_id: str, name: str, *, sent: bool = True) -> ToolCallSettled:
    return ToolCallSettled(call_id, name, "answered", "ok", 0.01, 0.02 if sent else None)


def ends(tracker: ExchangeTracker, events: list[SessionEvent]) -> list[bool]:
    return [tracker.feed(event) for event in events]


def test_a_turn_without_calls_ends_at_its_turn_complete() -> None:
    assert ends(ExchangeTracker(registry()), [TextOut("hi"), TurnComplete()]) == [False, True]


def test_a_running_non_blocking_call_keeps_the_exchange_open_until_its_reply() -> None:
    events: list[SessionEvent] = [
        started("a", "get_weather"),
        started("b", "book_table", "NON_BLOCKING"),
        settled("a", "get_weather"),
        TextOut("Sunny; booking now."),
        TurnComplete(),  # book_table still runs
        settled("b", "book_table"),
        TurnComplete(),  # closes nothing new: no output since the answer went out
        TextOut("Booked."),
        TurnComplete(),  # the reply to the answer
    ]
    done = ends(ExchangeTracker(registry()), events)
    assert done == [False] * 8 + [True]


def test_silent_answers_and_calls_never_answered_owe_no_reply() -> None:
    tracker = ExchangeTracker(registry())
    events: list[SessionEvent] = [
        started("n", "note", "NON_BLOCKING"),
        started("c", "book_table", "NON_BLOCKING"),
        settled("n", "note"),
        settled("c", "book_table", sent=False),  # cancelled: nothing sent
        TurnComplete(),
    ]
    assert ends(tracker, events)[-1] is True
    assert tracker.open_calls == 0 and not tracker.reply_due


def test_a_reply_must_follow_the_latest_answer() -> None:
    tracker = ExchangeTracker(registry())
    events: list[SessionEvent] = [
        started("b1", "book_table", "NON_BLOCKING"),
        started("b2", "book_table", "NON_BLOCKING"),
        settled("b1", "book_table"),
        AudioOut(b"\0\0", 24_000),
        settled("b2", "book_table"),  # sent while the first reply is being spoken
        TurnComplete(),  # the first reply's end
        AudioOut(b"\0\0", 24_000),
        TurnComplete(),  # the second's
    ]
    assert ends(tracker, events) == [False] * 7 + [True]


def test_closed_always_ends_it() -> None:
    tracker = ExchangeTracker(registry())
    assert ends(tracker, [started("a", "get_weather"), Closed("closed")]) == [False, True]


async def test_the_next_question_gets_its_own_calls() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        weather, booking = await conv.tool_call(
            [("get_weather", {"city": "Paris"}), ("book_table", {"restaurant": "Chez Janou"})]
        )
        await conv.wait_answers([weather])
        await conv.say("Sunny in Paris; booking now.")
        await conv.turn_complete(wait=False)
        await conv.wait_answers([booking])  # the emulated model speaks of it once idle
        await conv.expect_turn()
        (oslo,) = await conv.tool_call([("get_weather", {"city": "Oslo"})])
        await conv.wait_answers([oslo])
        await conv.say("Sunny in Oslo.")
        await conv.turn_complete()

    gate = anyio.Event()

    async def read(session: Any) -> list[SessionEvent]:
        seen: list[SessionEvent] = []
        async for event in session.exchange():
            seen.append(event)
            if isinstance(event, TurnComplete):
                gate.set()  # the booking finishes only once its turn has ended
        return seen

    async with Emulator(scenario) as emu, open_session(emu, registry(gate)) as session:
        with anyio.fail_after(seconds(30)):
            await session.send_text("Weather in Paris, and book Chez Janou?")
            first = await read(session)
            await session.send_text("And in Oslo?")
            second = await read(session)
    # The first read held on past its first TurnComplete until the booking's reply was spoken.
    assert sum(isinstance(e, TurnComplete) for e in first) == 2
    assert {e.name for e in of_type(first, ToolCallSettled)} == {"get_weather", "book_table"}
    (reply,) = [e.text for e in of_type(first, TextOut)][1:]
    assert "Chez Janou" in reply
    assert [e.args for e in of_type(second, ToolCallStarted)] == [{"city": "Oslo"}]
    assert [e.text for e in of_type(second, TextOut)] == ["Sunny in Oslo."]
