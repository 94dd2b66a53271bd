"""The default rule-based model: a user turn naming cities becomes parallel tool calls.

Good enough for a demo: "weather in Paris and Tokyo?" yields, for each city, one call to the
declared ``get_weather`` and one to every other declared function taking a ``city``, all in one
``toolCall``. It waits for the BLOCKING answers, then speaks them back as text
(``outputTranscription``) and audio; NON_BLOCKING answers are reported by the connection as they
arrive. Any sustained audio followed by silence is a user utterance, taken to say ``heard``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from livebridge.emulator.connection import UserTurn
from livebridge.emulator.speech import spoken

if TYPE_CHECKING:
    from livebridge.emulator.scenario import Conversation

CITIES = (
    "Paris",
    "London",
    "Tokyo",
    "New York",
    "Berlin",
    "Madrid",
    "Rome",
    "Sydney",
    "Cairo",
    "Toronto",
    "Lisbon",
    "Amsterdam",
)


@dataclass(frozen=True, slots=True)
class RuleModel:
    """Answers every user turn by rule; ``heard`` is what an audio turn is taken to say."""

    cities: tuple[str, ...] = CITIES
    heard: str = "What's the weather in Paris and Tokyo?"
    function: str = "get_weather"
    speak_seconds: float = 0.4

    async def __call__(self, conv: Conversation) -> None:
        while True:
            await self.respond(conv, await conv.expect_turn())

    def named_cities(self, text: str) -> list[str]:
        """Cities named in ``text``, in the order they are mentioned."""
        lowered = text.lower()
        found = [(lowered.find(city.lower()), city) for city in self.cities]
        return [city for position, city in sorted(found) if position >= 0]

    def pick_functions(self, conv: Conversation) -> list[str]:
        """The declared functions to call per city: ``function`` first, then those taking a city."""
        declarations = conv.declarations
        picked = [self.function] if self.function in declarations else []
        for name, declaration in declarations.items():
            schema = declaration.parameters_json_schema or declaration.parameters or {}
            takes_city = isinstance(schema, dict) and "city" in (schema.get("properties") or {})
            if takes_city and name not in picked:
                picked.append(name)
        return picked

    async def respond(self, conv: Conversation, turn: UserTurn) -> None:
        text = turn.text if turn.kind == "text" and turn.text else self.heard
        if turn.kind == "audio" and conv.setup.input_audio_transcription is not None:
            await conv.send(
                {"serverContent": {"inputTranscription": {"text": text, "finished": True}}}
            )
        cities = self.named_cities(text)
        functions = self.pick_functions(conv)
        if not cities or not functions:
            await self._reply(conv, f"You said: {text}")
            return
        asked = [(city, function) for city in cities for function in functions]
        ids = await conv.tool_call([(function, {"city": city}) for city, function in asked])
        blocking = [
            (city, call_id)
            for (city, _), call_id in zip(asked, ids, strict=True)
            if conv.known_calls[call_id].blocking
        ]
        if not blocking:
            await self._reply(conv, "Let me check that for you.")
            return
        answers = await conv.wait_answers([call_id for _, call_id in blocking])
        if len(answers) < len(blocking):
            return  # interrupted: the calls were cancelled and the turn already ended
        parts = [f"{city}: {spoken(answers[call_id].response)}" for city, call_id in blocking]
        later = "" if len(blocking) == len(ids) else " More to follow when it is ready."
        await self._reply(conv, "; ".join(parts) + "." + later)

    async def _reply(self, conv: Conversation, text: str) -> None:
        await conv.say(text)
        if conv.session.modality == "AUDIO":
            await conv.speak(self.speak_seconds)
        await conv.turn_complete()
