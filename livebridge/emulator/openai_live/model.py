"""The default model of ``Emulator(model="gpt-live-…")``: a plain client gets delegations
without writing a scenario.

As ``RuleModel`` does on the other protocols: a user's words naming places become parallel
calls, one per place to every delegated function that takes one place (``get_weather`` first).
Typed text (a user message, then ``response.create``) is answered by the backend's response to
that create; each spoken utterance (speech, then half a second of silence) is taken to say
``heard``: the voice model delegates, the backend calls, and once the outputs are in and the
client continued, the voice answers for ``speak_seconds``. Words that name no place get a reply
in text, and speech, with no call.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from functools import partial
from typing import Any

from livebridge.emulator.model import RuleModel, named_places, place_parameter
from livebridge.emulator.openai_live.session import LiveServerSession
from livebridge.vendors.gemini.messages import FunctionDeclaration

_FOREVER = 24 * 3600.0  # the model waits as long as the session lasts
_HEARD = RuleModel().phrase(1)  # what a spoken utterance says, as on the other protocols


@dataclass(frozen=True, slots=True)
class LiveRuleModel:
    """Delegates by rule; ``heard`` is what a spoken utterance is taken to say."""

    heard: str = _HEARD
    function: str = "get_weather"
    speak_seconds: float = 0.4
    places: Collection[str] = ()

    async def __call__(self, live: LiveServerSession) -> None:
        live.planner = partial(self.plan, live)
        heard = 0
        while True:
            await live.wait_until(partial(_heard_after, live, heard), timeout=_FOREVER)
            heard = live.utterances
            delegation = (live.session or {}).get("delegation") or {}
            if delegation.get("type") != "responses":
                continue  # client delegation: the app answers (a scenario delegates to it)
            calls = self.plan(live, self.heard)
            if calls:
                creates = live.backend.creates
                await live.delegate(calls)
                await live.wait_until(partial(_continued_after, live, creates), timeout=_FOREVER)
            await live.speak(self.speak_seconds)

    def plan(self, live: LiveServerSession, text: str) -> list[tuple[str, dict[str, Any]]]:
        """The calls ``text`` asks for: each place it names, to each function taking one."""
        delegation = (live.session or {}).get("delegation") or {}
        tools = (delegation.get("responses") or {}).get("tools") or []
        takes = [
            (str(tool.get("name")), parameter)
            for tool in tools
            if isinstance(tool, dict) and tool.get("type") == "function"
            if (parameter := _place_parameter(tool)) is not None
        ]
        takes.sort(key=lambda pair: pair[0] != self.function)
        return [
            (name, {parameter: place})
            for place in named_places(text, self.places)
            for name, parameter in takes
        ]


def _place_parameter(tool: dict[str, Any]) -> str | None:
    schema = tool.get("parameters")
    declaration = FunctionDeclaration(
        name=str(tool.get("name")),
        parameters_json_schema=schema if isinstance(schema, dict) else None,
    )
    return place_parameter(declaration)


def _heard_after(live: LiveServerSession, utterances: int) -> bool:
    return live.utterances > utterances


def _continued_after(live: LiveServerSession, creates: int) -> bool:
    return live.backend.creates > creates
