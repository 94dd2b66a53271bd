"""The demo's scripted conversation: the travel agent's tools, the user's lines, the model's side.

Both sides of each exchange live here so they can be read together. ``pace`` scales every delay
(1.0 for people watching, smaller for tests).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio

from livebridge.calls.tools import ToolRegistry
from livebridge.emulator import Answer, Conversation, UserTurn
from livebridge.errors import ToolError

#: Audio the model plays after each reply (at real-time pace).
SPEECH_SECONDS = 0.2

#: The call the user interrupts in the barge-in exchange.
SLOW_CALL = "check_opening_hours"


@dataclass(frozen=True, slots=True)
class Step:
    """One user line and what ends the exchange on the app's side.

    ``turns``: ``turnComplete`` messages to wait for. ``barge_in``: said over the model, with
    activity start/end, once the slow call is running. ``resumes``: the exchange also ends with
    the session moving to a new connection.
    """

    user: str
    turns: int = 1
    barge_in: str | None = None
    resumes: bool = False


STEPS = (
    Step("I'm in Paris this weekend. Weather, a dinner spot, traffic, events, and the euro rate?"),
    Step("Book Chez Janou for 4 at 8 pm, please.", turns=2),
    Step("Is the Louvre open tonight?", turns=2, barge_in="Actually, never mind. Time in Tokyo?"),
    Step("And the weather in Rome on Sunday?", resumes=True),
    Step("Thanks, that's all!"),
)

#: The same conversation on OpenAI Realtime: the booking is one BLOCKING answer (no NON_BLOCKING
#: there), the barge-in cancels the response carrying the slow call before it runs, and there is
#: no goAway to resume from.
OPENAI_STEPS = (
    STEPS[0],
    Step("Book Chez Janou for 4 at 8 pm, please."),
    STEPS[2],
    STEPS[4],
)


class DemoTools:
    """The travel agent's tools; ``slow_call_started`` is set once the barge-in target runs."""

    def __init__(self, pace: float) -> None:
        self.pace = pace
        self.slow_call_started = anyio.Event()
        self.registry = self._build()

    async def _pause(self, seconds: float) -> None:
        await anyio.sleep(seconds * self.pace)

    def _build(self) -> ToolRegistry:
        tools = ToolRegistry()
        pause = self._pause

        @tools.tool(timeout=2.0, idempotent=True)
        async def get_weather(city: str, day: str = "today") -> dict[str, Any]:
            """Weather for a city."""
            await pause(0.25)
            sky = {"Paris": "sunny", "Rome": "clear"}.get(city, "cloudy")
            return {"city": city, "day": day, "sky": sky, "high_c": 24}

        @tools.tool(timeout=2.0)
        async def find_restaurant(city: str, people: int) -> dict[str, Any]:
            """A restaurant with a free table."""
            await pause(0.4)
            return {"name": "Chez Janou", "city": city, "people": people, "free_at": "20:00"}

        @tools.tool(timeout=2.0)
        async def get_traffic(city: str) -> dict[str, Any]:
            """Road traffic for a city."""
            await pause(0.1)
            raise ToolError(f"the traffic feed for {city} is down", retryable=True)

        @tools.tool(timeout=0.6)
        async def find_events(city: str) -> list[str]:
            """Events this weekend (a slow backend: its timeout is 0.6 s)."""
            await anyio.sleep(60)
            return ["never"]

        @tools.tool(timeout=2.0, idempotent=True)
        async def convert_currency(amount: float, source: str, target: str) -> dict[str, Any]:
            """Convert an amount of money."""
            await pause(0.15)
            return {"amount": round(amount * 1.08, 2), "currency": target}

        @tools.tool(behavior="NON_BLOCKING", scheduling="SILENT")
        async def book_table(
            restaurant: str, people: int, time: str
        ) -> AsyncIterator[dict[str, Any]]:
            """Book a table; progress is streamed (``will_continue``) while it runs."""
            for step in ("checking availability", "holding the table", "confirmed"):
                await pause(0.3)
                yield {"restaurant": restaurant, "people": people, "time": time, "status": step}
            yield {"status": "confirmed", "reference": "JN-4821"}

        @tools.tool(name=SLOW_CALL, timeout=30.0)
        async def check_opening_hours(place: str) -> str:
            """Opening hours of a place (a very slow backend)."""
            self.slow_call_started.set()
            await anyio.sleep(60)
            return "never"

        @tools.tool(idempotent=True)
        async def get_time(city: str) -> str:
            """The local time in a city."""
            await pause(0.05)
            return "04:12" if city == "Tokyo" else "21:12"

        return tools


async def model_side(conv: Conversation) -> None:
    """The emulated model: first connection until ``goAway``, then the resumed one."""
    if conv.resumed_from is None:
        await _parallel_calls(conv)
        await _booking(conv)
        await _barge_in(conv)
        await _go_away(conv)
    else:
        await _user_turn(conv)
        await _reply(conv, "You're welcome. Enjoy Paris, and dinner at Chez Janou!")
        await conv.turn_complete()


async def _reply(conv: Conversation, text: str) -> None:
    """Speak ``text``: its transcription, then a moment of audio."""
    await conv.say(text)
    await conv.speak(SPEECH_SECONDS)


async def _user_turn(conv: Conversation) -> UserTurn:
    """The next user turn, skipping the empty turn an activity end marker produces."""
    while True:
        turn = await conv.expect_turn()
        if turn.kind == "text" or turn.audio_seconds > 0:
            return turn


def _output(answer: Answer | None) -> Any:
    """The last ``output`` the client sent for a call (streamed Gemini calls send several)."""
    if answer is None:
        return None
    for part in reversed(answer.parts):
        output = (part.get("response") or {}).get("output")
        if output is not None:
            return output
    return (answer.response or {}).get("output")


async def _parallel_calls(conv: Conversation) -> None:
    await _user_turn(conv)
    await _reply(conv, "Let me check all of that at once.")
    ids = await conv.tool_call(
        [
            ("get_weather", {"city": "Paris", "day": "Saturday"}),
            ("find_restaurant", {"city": "Paris", "people": 4}),
            ("get_traffic", {"city": "Paris"}),
            ("find_events", {"city": "Paris"}),
            ("convert_currency", {"amount": 100, "source": "USD", "target": "EUR"}),
        ]
    )
    answers = await conv.wait_answers(ids)
    weather = _output(answers.get(ids[0])) or {}
    money = _output(answers.get(ids[4])) or {}
    await _reply(
        conv,
        f"Saturday in Paris looks {weather.get('sky', 'fine')}, {weather.get('high_c', '?')} °C. "
        f"Chez Janou has a table at 8 pm. The traffic feed is down and the events search timed "
        f"out, sorry. 100 dollars is {money.get('amount', '?')} euros.",
    )
    await conv.turn_complete()


async def _booking(conv: Conversation) -> None:
    await _user_turn(conv)
    ids = await conv.tool_call(
        [("book_table", {"restaurant": "Chez Janou", "people": 4, "time": "20:00"})]
    )
    await _reply(conv, "I'm booking it now; I'll tell you when it's confirmed.")
    await conv.turn_complete()
    answers = await conv.wait_answers(ids)
    booking = _output(answers.get(ids[0])) or {}
    await _reply(conv, f"Your table is confirmed, reference {booking.get('reference', '?')}.")
    await conv.turn_complete()


async def _barge_in(conv: Conversation) -> None:
    await _user_turn(conv)
    await _reply(conv, "Let me look up the Louvre's hours.")
    await conv.tool_call([(SLOW_CALL, {"place": "Louvre"})])
    # The user talks over the model: the emulator interrupts the turn and cancels the call.
    await _user_turn(conv)
    ids = await conv.tool_call([("get_time", {"city": "Tokyo"})])
    answers = await conv.wait_answers(ids)
    await _reply(conv, f"Sure. It's {_output(answers.get(ids[0]))} in Tokyo.")
    await conv.turn_complete()


async def _go_away(conv: Conversation) -> None:
    await _user_turn(conv)
    ids = await conv.tool_call([("get_weather", {"city": "Rome", "day": "Sunday"})])
    await conv.go_away("10s")  # the server is about to recycle this connection
    answers = await conv.wait_answers(ids)
    weather = _output(answers.get(ids[0])) or {}
    await _reply(conv, f"Sunday in Rome: {weather.get('sky', 'fine')}, {weather.get('high_c')} °C.")
    await conv.turn_complete()  # followed by a resumable handle; the client switches over
    await asyncio.Event().wait()


async def openai_model_side(conv: Conversation) -> None:
    """The emulated model on OpenAI Realtime: one connection, the exchanges of ``OPENAI_STEPS``."""
    await _parallel_calls(conv)
    await _user_turn(conv)
    ids = await conv.tool_call(
        [("book_table", {"restaurant": "Chez Janou", "people": 4, "time": "20:00"})]
    )
    answers = await conv.wait_answers(ids)
    steps = _output(answers.get(ids[0])) or []  # a streaming tool's items, as one output
    reference = next((s["reference"] for s in steps if "reference" in s), "?")
    await _reply(conv, f"Your table is confirmed, reference {reference}.")
    await conv.turn_complete()
    await _user_turn(conv)
    await _reply(conv, "Let me look up the Louvre's hours.")
    await conv.tool_call([(SLOW_CALL, {"place": "Louvre"})])
    # The user talks over the model: the server hears it and cancels the response, call and all.
    await conv.interrupted()
    await _user_turn(conv)
    ids = await conv.tool_call([("get_time", {"city": "Tokyo"})])
    answers = await conv.wait_answers(ids)
    await _reply(conv, f"Sure. It's {_output(answers.get(ids[0]))} in Tokyo.")
    await conv.turn_complete()
    await _user_turn(conv)
    await _reply(conv, "You're welcome. Enjoy Paris, and dinner at Chez Janou!")
    await conv.turn_complete()
