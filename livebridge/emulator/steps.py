"""Scenarios as JSON: a list of one-key steps, validated when loaded, played in order.

Each step is ``{"name": argument}``; a step that is unknown or malformed is refused when the file
is loaded, naming its index, so a bad file never reaches a client as a 1011::

    [{"expect_turn": {}},
     {"tool_call": [["get_weather", {"city": "Paris"}], {"name": "get_time", "id": "t-1"}]},
     {"sleep": 1.0}, {"cancel": {}}, {"sleep": 1.0},
     {"say": "Never mind."}, {"turn_complete": {}}]

The same steps play on OpenAI Realtime (``protocol="openai"``), where ``go_away`` and
``resumption_update`` do not exist (refused when loaded for that protocol), ``send`` takes any
event object, ``tool_call_raw`` sends one ``function_call`` with its ``arguments`` verbatim, and
``end_response`` ends the active response with a status (``{"status": "incomplete"}``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from livebridge.emulator.model import RuleModel
from livebridge.emulator.scenario import Conversation, Scenario
from livebridge.errors import ScenarioError
from livebridge.vendors.gemini import wire

Seconds = Annotated[float, msgspec.Meta(ge=0)]


class _Options(msgspec.Struct, forbid_unknown_fields=True):
    """Base of the steps whose argument is an object of options (``{}`` for the defaults)."""


class ExpectTurn(_Options):
    timeout: Seconds | None = None  # a TimeoutError ends the scenario (the client sees 1011)


class CallSpec(_Options):
    name: str
    args: dict[str, Any] = {}
    id: str | None = None


class WaitAnswers(_Options):
    ids: list[str] | None = None  # default: the calls of the last tool_call
    timeout: Seconds | None = None  # when it passes, the scenario goes on


class Cancel(_Options):
    ids: list[str] | None = None  # default: the calls of the last tool_call


class TurnComplete(_Options):
    wait: bool = True  # False: end the turn while BLOCKING calls are still open
    usage: dict[str, Any] | None = None


class Interrupted(_Options):
    cancel: bool = False  # True: toolCallCancellation for the turn's open calls
    turn_complete: bool = True  # False: interrupted, and no turnComplete


class EndResponse(_Options):
    status: Literal["completed", "cancelled", "incomplete"] = "completed"
    reason: str | None = None  # e.g. "max_output_tokens", "turn_detected"


class RawCall(_Options):
    name: str
    arguments: str  # sent as given, even when it is not JSON
    id: str | None = None


Calls = list[tuple[str, dict[str, Any]] | CallSpec]
#: Steps that only one protocol has.
GEMINI_ONLY = frozenset({"go_away", "resumption_update"})
OPENAI_ONLY = frozenset({"tool_call_raw", "end_response"})

#: Every step and the type of its argument.
STEP_TYPES: dict[str, Any] = {
    "expect_turn": ExpectTurn,
    "say": str,
    "speak": Seconds,
    "tool_call": Calls,
    "wait_answers": WaitAnswers,
    "cancel": Cancel,
    "sleep": Seconds,
    "go_away": str,
    "resumption_update": bool,
    "turn_complete": TurnComplete,
    "interrupted": Interrupted,
    "close": tuple[int, str],
    "send": dict[str, Any],
    "tool_call_raw": RawCall,
    "end_response": EndResponse,
    "raw": str,
    "model": _Options,
}

Step = tuple[str, Any]


class _Player:
    """Plays validated steps on one connection, remembering the last ``tool_call``'s ids."""

    def __init__(self, conv: Conversation) -> None:
        self.conv = conv
        self.last: list[str] = []

    async def play(self, steps: list[Step]) -> None:
        for name, arg in steps:
            await getattr(self, name)(arg)

    async def expect_turn(self, arg: ExpectTurn) -> None:
        await self.conv.expect_turn(arg.timeout)

    async def say(self, arg: str) -> None:
        await self.conv.say(arg)

    async def speak(self, arg: float) -> None:
        await self.conv.speak(arg)

    async def tool_call(self, arg: Calls) -> None:
        specs = [c if isinstance(c, CallSpec) else CallSpec(c[0], c[1]) for c in arg]
        calls = [(spec.name, spec.args) for spec in specs]
        self.last = await self.conv.tool_call(calls, [spec.id for spec in specs])

    async def wait_answers(self, arg: WaitAnswers) -> None:
        try:
            await self.conv.wait_answers(arg.ids or self.last, arg.timeout)
        except TimeoutError:
            return

    async def cancel(self, arg: Cancel) -> None:
        await self.conv.cancel(arg.ids or self.last)

    async def sleep(self, arg: float) -> None:
        await asyncio.sleep(arg)

    async def go_away(self, arg: str) -> None:
        await self.conv.go_away(arg)

    async def resumption_update(self, arg: bool) -> None:
        await self.conv.resumption_update(resumable=arg)

    async def turn_complete(self, arg: TurnComplete) -> None:
        await self.conv.turn_complete(arg.usage, wait=arg.wait)

    async def interrupted(self, arg: Interrupted) -> None:
        await self.conv.interrupted(cancel=arg.cancel, turn_complete=arg.turn_complete)

    async def close(self, arg: tuple[int, str]) -> None:
        await self.conv.close(*arg)

    async def send(self, arg: dict[str, Any]) -> None:
        await self.conv.send(arg)

    async def end_response(self, arg: EndResponse) -> None:
        await self.conv.end_response(arg.status, arg.reason)

    async def tool_call_raw(self, arg: RawCall) -> None:
        self.last = [await self.conv.tool_call_raw(arg.name, arg.arguments, arg.id)]

    async def raw(self, arg: str) -> None:
        await self.conv.send_raw(arg.encode())

    async def model(self, arg: _Options) -> None:
        await RuleModel()(self.conv)


def _validate(index: int, step: Any, protocol: str) -> Step:
    if not isinstance(step, dict) or len(step) != 1:
        raise ScenarioError(f'step {index}: expected a one-key object like {{"say": "hi"}}')
    ((name, arg),) = step.items()
    kind = STEP_TYPES.get(name)
    if kind is None:
        known = ", ".join(STEP_TYPES)
        raise ScenarioError(f"step {index}: unknown step {name!r}; steps are {known}")
    other = GEMINI_ONLY if protocol == "openai" else OPENAI_ONLY
    if name in other:
        raise ScenarioError(f"step {index}: {name!r} is not a step of the {protocol} protocol")
    try:
        value = msgspec.convert(arg, kind, str_keys=True)
        if name == "go_away":
            wire.parse_duration(value)
        if name == "send" and protocol == "gemini":
            msgspec.convert(value, wire.ServerMessage)
    except (msgspec.ValidationError, ValueError) as error:
        raise ScenarioError(f"step {index} ({name}): {error}") from None
    return name, value


def scenario_from_steps(steps: list[dict[str, Any]], protocol: str = "gemini") -> Scenario:
    """Validate JSON steps (each ``{"step_name": argument}``) for ``protocol`` (``"gemini"`` or
    ``"openai"``) and build the scenario they play."""
    if not isinstance(steps, list):
        raise ScenarioError(f"expected a JSON list of steps, got {type(steps).__name__}")
    validated = [_validate(index, step, protocol) for index, step in enumerate(steps)]

    async def scenario(conv: Conversation) -> None:
        await _Player(conv).play(validated)

    return scenario


def load_scenario(path: Path, protocol: str = "gemini") -> Scenario:
    """Read and validate a JSON list of steps from ``path`` for ``protocol``."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ScenarioError(f"cannot read scenario {path}: {error.strerror}") from None
    try:
        steps = msgspec.json.decode(data)
    except msgspec.DecodeError as error:
        raise ScenarioError(f"scenario {path} is not JSON: {error}") from None
    try:
        return scenario_from_steps(steps, protocol)
    except ScenarioError as error:
        raise ScenarioError(f"scenario {path}: {error}") from None
