"""The default rule-based model: a user turn naming places becomes parallel tool calls.

"Weather in Oslo and in Lisbon?" or "Reykjavik and Ulaanbaatar" yields, for each place named, one
call to every declared function that takes one place (the declared ``get_weather`` first), all in
one ``toolCall``. A place is one the model knows (``livebridge.emulator.places``: countries and a
few hundred cities, plus any a scenario adds with ``RuleModel(places=...)``), written with capitals
("New York", "Rio de Janeiro", "São Paulo"): a word that merely opens a sentence ("Trains between
Oslo and Lisbon?") is never one. A function takes one place when its only required parameter (or,
with none required, its only parameter, or one named ``city``) is a string; a parameter named like
a ticker (``symbol``, ``ticker``) takes the all-capitals words instead ("Price of ACME and
GLOBEX?"). With ``RuleModel(by_description=True)`` (tools it did not write, an MCP server's), it
calls only the functions whose name or description shares a word with the turn ("Weather in
Oslo?" picks "Weather for a city.", not "Book a guided tour."), or all when none does. The model
waits for the BLOCKING answers, then speaks them back as text
(``outputTranscription``) and audio; NON_BLOCKING answers are reported by the connection as they
arrive. It starts answering ``first_output`` seconds after the user's turn ends, as a real model
takes a moment. Any sustained audio followed by silence is a user utterance, taken to say
``heard``. On OpenAI Realtime the calls are one response's ``function_call`` items (with
``parallel_tool_calls: false``, one call per response, the next in the response that continues
it), and the spoken answer goes into the response the client's ``response.create`` opens.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from livebridge.emulator.places import PLACES
from livebridge.emulator.shared import UserTurn
from livebridge.emulator.speech import spoken
from livebridge.errors import ScenarioError

if TYPE_CHECKING:
    from livebridge.emulator.scenario import Conversation
    from livebridge.vendors.gemini import wire

# Words, and single marks of punctuation (which end a place name).
_TOKEN = re.compile(r"[^\W\d_][\w'\u2019-]*|[^\w\s]")
#: Lower-case words that sit inside a place name: "Rio de Janeiro", "Frankfurt am Main", and
#: every such word of the known places ("Dar es Salaam", "Trinidad and Tobago").
JOINERS = frozenset(
    "de da do dos das del della di du la le les van von der den am an upon".split()  # noqa: SIM905
) | {word for place in PLACES for word in place.split() if word.islower()}
#: The default time to first output, in seconds: of the order of the few hundred milliseconds
#: realtime models take to start answering (``RuleModel.first_output``).
FIRST_OUTPUT_SECONDS = 0.3
#: Parameters that take ticker symbols rather than places.
SYMBOL_PARAMETERS = frozenset({"symbol", "symbols", "ticker", "tickers", "ticker_symbol", "stock"})
_SYMBOL = re.compile(r"\b[A-Z][A-Z0-9]{1,5}(?:\.[A-Z]{1,2})?\b")
#: Words of a turn that say nothing about which tool it asks for.
_COMMON = """what whats what's tell about please with from this that there have like could would
does city cities town place places some want need know give show today tomorrow"""
COMMON_WORDS = frozenset(_COMMON.split())
_WORD = re.compile(r"[^\W\d_]+")
_KNOWN = {place.casefold(): place for place in PLACES}
_LONGEST = max(len(place.split()) for place in PLACES)


def named_places(text: str, known: Collection[str] = ()) -> list[str]:
    """The known places named in ``text`` (``PLACES`` and ``known``), in order, each once."""
    names = {**_KNOWN, **{place.casefold(): place for place in known}}
    longest = max([_LONGEST, *(len(place.split()) for place in known)])
    places: list[str] = []
    run: list[str] = []
    for token in [*_TOKEN.findall(text), "."]:
        if token[0].isupper() or (run and token.lower() in JOINERS):
            run.append(token)
            continue
        for place in _places_in(run, names, longest):
            if place not in places:
                places.append(place)
        run = []
    return places


def _places_in(run: list[str], names: dict[str, str], longest: int) -> list[str]:
    """The known places in a run of words, longest match first, left to right."""
    found: list[str] = []
    start = 0
    while start < len(run):
        for end in range(min(len(run), start + longest), start, -1):
            words = run[start:end]
            if words[0][0].isupper() and words[-1][0].isupper():
                place = names.get(" ".join(words).casefold())
                if place is not None:
                    found.append(" ".join(words))
                    start = end
                    break
        else:
            start += 1
    return found


def ticker_symbols(text: str) -> list[str]:
    """The all-capitals words of ``text`` that read as ticker symbols, in order, each once."""
    return list(dict.fromkeys(_SYMBOL.findall(text)))


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


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.casefold()) if len(w) >= 4} - COMMON_WORDS


def _same_word(a: str, b: str) -> bool:
    """The same word, give or take an ending ("forecast", "forecasts"; "book", "booking")."""
    short, long = sorted((a, b), key=len)
    return long.startswith(short)


def described(text: str, declaration: wire.FunctionDeclaration, places: Collection[str]) -> bool:
    """Does ``text`` (its places left out) share a word with the function's name or
    description?"""
    asked = _words(text) - {w for place in places for w in _words(place)}
    own = _words(declaration.name.replace("_", " ").replace("-", " "))
    own |= _words(declaration.description or "")
    return any(_same_word(a, b) for a in asked for b in own)


@dataclass(frozen=True, slots=True)
class RuleModel:
    """Answers every user turn by rule; ``heard`` is what an audio turn is taken to say: one
    phrase for every audio turn, or the scenario's script, one phrase per audio turn in order
    (the last one repeats), so that what a simulated caller says is what the model hears."""

    heard: str | Sequence[str] = "What's the weather in Paris and Tokyo?"
    function: str = "get_weather"
    speak_seconds: float = 0.4
    #: Places known besides ``PLACES`` (a scenario's own: "Narnia", "Gotham").
    places: Collection[str] = ()
    #: Call only the functions whose name or description shares a word with the turn.
    by_description: bool = False
    #: Seconds from the end of a user turn to the model's first output (call or words): a real
    #: model thinks before it answers, and a client racing its own input against that answer
    #: must be seen to race (0: at once).
    first_output: float = FIRST_OUTPUT_SECONDS

    async def __call__(self, conv: Conversation) -> None:
        spoken_turns = 0  # this connection's: the script starts over on each
        while True:
            turn = await conv.expect_turn()
            if turn.kind == "audio":
                spoken_turns += 1
            await self.respond(conv, turn, self.phrase(spoken_turns))

    def phrase(self, number: int) -> str:
        """What the ``number``-th audio turn (from 1) is taken to say."""
        if isinstance(self.heard, str):
            return self.heard
        script = list(self.heard)
        if not script:
            raise ScenarioError("RuleModel(heard=...) needs at least one phrase")
        return script[min(max(number, 1), len(script)) - 1]

    def pick_functions(self, conv: Conversation, text: str = "") -> list[tuple[str, str]]:
        """(function, place parameter) for each declared function taking a place (with
        ``by_description``, each the turn ``text`` describes, if any is)."""
        declarations = conv.declarations
        picked = [
            (name, parameter)
            for name, declaration in declarations.items()
            if (parameter := place_parameter(declaration)) is not None
        ]
        if self.by_description:
            places = named_places(text, self.places)
            matching = [p for p in picked if described(text, declarations[p[0]], places)]
            picked = matching or picked
        return sorted(picked, key=lambda pair: pair[0] != self.function)

    async def respond(self, conv: Conversation, turn: UserTurn, heard: str | None = None) -> None:
        """Answer one turn; an audio turn is taken to say ``heard`` (default: the first
        scripted phrase)."""
        text = turn.text if turn.kind == "text" and turn.text else (heard or self.phrase(1))
        if turn.kind == "audio":
            await conv.heard(text)
        if self.first_output > 0:
            await asyncio.sleep(self.first_output)
        places, symbols = named_places(text, self.places), ticker_symbols(text)
        asked = [
            (subject, (name, parameter))
            for name, parameter in self.pick_functions(conv, text)
            for subject in (symbols if parameter in SYMBOL_PARAMETERS else places)
        ]
        if not asked:
            await self._reply(conv, f"You said: {text}")
            return
        order = {subject: index for index, subject in enumerate([*places, *symbols])}
        asked.sort(key=lambda pair: order[pair[0]])  # by subject, the declared function first
        calls = [(name, {param: subject}) for subject, (name, param) in asked]
        if not conv.parallel_calls:
            await self._one_at_a_time(conv, [subject for subject, _ in asked], calls)
            return
        ids = await conv.tool_call(calls)
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

    async def _one_at_a_time(
        self, conv: Conversation, subjects: list[str], calls: list[tuple[str, dict[str, Any]]]
    ) -> None:
        """Without parallel calls: one call per response, the next once it is answered."""
        parts = []
        for subject, call in zip(subjects, calls, strict=True):
            (call_id,) = await conv.tool_call([call])
            answers = await conv.wait_answers([call_id])
            if call_id not in answers:
                return  # cancelled: the response already ended
            parts.append(f"{subject}: {spoken(answers[call_id].response)}")
        await self._reply(conv, "; ".join(parts) + ".")

    async def _reply(self, conv: Conversation, text: str) -> None:
        await conv.say(text)
        if conv.modality == "AUDIO":
            await conv.speak(self.speak_seconds)
        await conv.turn_complete()
