"""The default rule-based model: a user turn naming places becomes parallel tool calls.

"Weather in Oslo and in Lisbon?" or "Reykjavik and Ulaanbaatar" yields, for each place named, one
call to every declared function that takes one place (the declared ``get_weather`` first), all in
one ``toolCall``. A place is a run of capitalised words ("New York", "Rio de Janeiro", "São
Paulo"), other than common words that start a sentence ("What", "Weather", "I'm", days, months).
A function takes one place when its only required parameter (or, with none required, its only
parameter, or one named ``city``) is a string. The model waits for the BLOCKING answers, then
speaks them back as text (``outputTranscription``) and audio; NON_BLOCKING answers are reported
by the connection as they arrive. Any sustained audio followed by silence is a user utterance,
taken to say ``heard``. On OpenAI Realtime the calls are one response's ``function_call`` items,
and the spoken answer goes into the response the client's ``response.create`` opens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from livebridge.emulator.shared import UserTurn
from livebridge.emulator.speech import spoken

if TYPE_CHECKING:
    from livebridge import wire
    from livebridge.emulator.scenario import Conversation

__all__ = ["JOINERS", "NOT_PLACES", "RuleModel", "named_places", "place_parameter"]

# Words, and single marks of punctuation (which end a place name).
_TOKEN = re.compile(r"[^\W\d_][\w'\u2019-]*|[^\w\s]")
#: Lower-case words that sit inside a place name: "Rio de Janeiro", "Frankfurt am Main".
JOINERS = frozenset(
    "de da do dos das del della di du la le les van von der den am an upon".split()  # noqa: SIM905
)

#: Capitalised words that are not places (they start sentences, or name times).
NOT_PLACES = frozenset(
    """
    a an the and or but so if then also please thanks thank hi hello hey ok okay yes no
    i i'm i'll i've i'd me my we we're our you you're your it it's this that these those there
    what what's whats which who how how's when where where's why is are was will would could can
    should do does did tell give show check find get look let let's book any some compare
    see say said plan planning going visit visiting fly flying trip travel
    weather forecast temperature time traffic news events rate rates today tomorrow tonight now
    monday tuesday wednesday thursday friday saturday sunday weekend morning evening afternoon
    january february march april may june july august september october november december
    """.split()  # noqa: SIM905 (reads as prose)
)


def named_places(text: str) -> list[str]:
    """The places named in ``text``, in order, each once."""
    places: list[str] = []
    run: list[str] = []
    joiners: list[str] = []
    for token in [*_TOKEN.findall(text), "."]:
        if token[0].isupper():
            run += [*joiners, token] if run else [token]
            joiners = []
        elif run and token.lower() in JOINERS:
            joiners.append(token)
        else:
            place = _strip_common_words(run)
            if place and place not in places:
                places.append(place)
            run, joiners = [], []
    return places


def _strip_common_words(words: list[str]) -> str:
    start, end = 0, len(words)
    while start < end and words[start].lower() in NOT_PLACES:
        start += 1
    while end > start and words[end - 1].lower() in NOT_PLACES:
        end -= 1
    return " ".join(words[start:end])


def place_parameter(declaration: wire.FunctionDeclaration) -> str | None:
    """The parameter that takes a place: the one required string parameter (or, with none
    required, the only one, or ``city``); None when the function takes no place."""
    schema = declaration.parameters_json_schema or declaration.parameters or {}
    if not isinstance(schema, dict):
        return None
    properties: dict[str, Any] = schema.get("properties") or {}
    required = [name for name in schema.get("required") or [] if name in properties]
    candidates = required or (list(properties) if len(properties) == 1 else [])
    if not candidates and "city" in properties:
        candidates = ["city"]
    if len(candidates) != 1:
        return None
    (name,) = candidates
    kind = properties[name].get("type") if isinstance(properties[name], dict) else None
    return name if kind is None or str(kind).lower() == "string" else None


@dataclass(frozen=True, slots=True)
class RuleModel:
    """Answers every user turn by rule; ``heard`` is what an audio turn is taken to say."""

    heard: str = "What's the weather in Paris and Tokyo?"
    function: str = "get_weather"
    speak_seconds: float = 0.4

    async def __call__(self, conv: Conversation) -> None:
        while True:
            await self.respond(conv, await conv.expect_turn())

    def pick_functions(self, conv: Conversation) -> list[tuple[str, str]]:
        """(function, place parameter) for each declared function taking a place."""
        picked = [
            (name, parameter)
            for name, declaration in conv.declarations.items()
            if (parameter := place_parameter(declaration)) is not None
        ]
        return sorted(picked, key=lambda pair: pair[0] != self.function)

    async def respond(self, conv: Conversation, turn: UserTurn) -> None:
        text = turn.text if turn.kind == "text" and turn.text else self.heard
        if turn.kind == "audio":
            await conv.heard(text)
        places = named_places(text)
        functions = self.pick_functions(conv)
        if not places or not functions:
            await self._reply(conv, f"You said: {text}")
            return
        asked = [(place, function) for place in places for function in functions]
        ids = await conv.tool_call([(name, {param: place}) for place, (name, param) in asked])
        blocking = [
            (place, call_id)
            for (place, _), call_id in zip(asked, ids, strict=True)
            if conv.known_calls[call_id].blocking
        ]
        if not blocking:
            await self._reply(conv, "Let me check that for you.")
            return
        answers = await conv.wait_answers([call_id for _, call_id in blocking])
        if len(answers) < len(blocking):
            return  # interrupted: the calls were cancelled and the turn already ended
        parts = [f"{place}: {spoken(answers[call_id].response)}" for place, call_id in blocking]
        later = "" if len(blocking) == len(ids) else " More to follow when it is ready."
        await self._reply(conv, "; ".join(parts) + "." + later)

    async def _reply(self, conv: Conversation, text: str) -> None:
        await conv.say(text)
        if conv.modality == "AUDIO":
            await conv.speak(self.speak_seconds)
        await conv.turn_complete()
