"""Scripting a conversation step by step: the ``Conversation`` a scenario is given.

A scenario is ``async def scenario(conv: Conversation) -> None``, run once per accepted connection
after ``setupComplete``. A scenario can also be a JSON list of one-key steps (``--scenario FILE``)::

    [{"expect_turn": {}}, {"tool_call": [["get_weather", {"city": "Paris"}]]},
     {"wait_answers": {}}, {"say": "Sunny."}, {"turn_complete": {}}]
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from livebridge import wire
from livebridge.emulator.checker import Answer, CallRecord
from livebridge.emulator.connection import EmulatedSession, UserTurn
from livebridge.emulator.model import RuleModel

_OWNER = "model"


class ScenarioError(Exception):
    """A scenario could not proceed (a malformed step, or an expectation that failed)."""


class Conversation:
    """The model's side of one connection, one step at a time."""

    def __init__(self, session: EmulatedSession) -> None:
        self.session = session

    @property
    def resumed_from(self) -> str | None:
        """The resumption handle this connection was opened with, if any."""
        return self.session.resumed_from

    @property
    def known_calls(self) -> dict[str, CallRecord]:
        """Every call this session knows about (inherited ones included when resumed)."""
        return self.session.checker.calls

    @property
    def setup(self) -> wire.Setup:
        return self.session.setup

    @property
    def declarations(self) -> dict[str, wire.FunctionDeclaration]:
        """The functions the client declared, by name."""
        return self.session.declarations

    async def expect_turn(self, timeout: float | None = None) -> UserTurn:  # noqa: ASYNC109
        """Wait for the next finished user turn (text, or audio ended by silence or a marker)."""
        async with asyncio.timeout(timeout):
            return await self.session.turns.get()

    async def say(self, text: str) -> None:
        await self.session.say(_OWNER, text)

    async def speak(self, seconds: float, rate: int = 24000) -> None:
        await self.session.speak(_OWNER, seconds, rate)

    async def tool_call(self, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[str]:
        """Send one ``toolCall`` with every call; returns the ids (``function-call-<u64>``)."""
        return await self.session.issue_calls(_OWNER, list(calls))

    async def wait_answers(
        self,
        ids: Sequence[str],
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> dict[str, Answer]:
        """Wait until each call is answered (finally, for streams) or cancelled."""
        session = self.session

        def settled() -> bool:
            return all(not session.checker.calls[i].open for i in ids)

        await session.wait_until(settled, timeout)
        answers = {i: session.resolved_answer(i) for i in ids}
        return {i: answer for i, answer in answers.items() if answer is not None}

    async def cancel(self, ids: Sequence[str]) -> None:
        await self.session.cancel_calls(list(ids))

    async def go_away(self, time_left: str = "5s") -> None:
        await self.session.go_away(time_left)

    async def resumption_update(self, *, resumable: bool = True) -> str | None:
        """Send ``sessionResumptionUpdate``; returns the new handle (None if not resumable)."""
        return await self.session.resumption_update(resumable=resumable)

    async def turn_complete(self, usage: dict[str, Any] | None = None) -> None:
        """End the turn (waits while a BLOCKING call of the turn is unanswered)."""
        metadata = msgspec.convert(usage, wire.UsageMetadata) if usage is not None else None
        await self.session.complete_turn(_OWNER, metadata)

    async def interrupted(self) -> None:
        """The model stops talking: ``interrupted``, then ``turnComplete``."""
        await self.session.interrupt(cancel_calls=False)

    async def send(self, message: dict[str, Any]) -> None:
        """Send any server message as given (camelCase JSON object)."""
        await self.session.send(msgspec.convert(message, wire.ServerMessage))

    async def send_raw(self, frame: bytes) -> None:
        """Send a frame exactly as given, even one that is not valid JSON."""
        await self.session.send_raw(frame)

    async def close(self, code: int = 1000, reason: str = "") -> None:
        await self.session.close(code, reason)


Scenario = Callable[[Conversation], Awaitable[None]]


def scenario_from_steps(steps: list[dict[str, Any]]) -> Scenario:
    """Build a scenario from JSON steps, each ``{"step_name": argument}``.

    Steps: ``expect_turn``, ``say`` (text), ``speak`` (seconds), ``tool_call`` (list of
    ``[name, args]``), ``wait_answers`` (for the last tool_call), ``cancel`` (the last tool_call),
    ``go_away`` (time left), ``resumption_update`` (resumable), ``turn_complete``,
    ``interrupted``, ``close`` (``[code, reason]``), ``send`` (a raw message) and ``model``
    (hand the rest of the connection to the default rule-based model).
    """
    for step in steps:
        if not isinstance(step, dict) or len(step) != 1:
            raise ScenarioError(f"each step is a one-key object, got {step!r}")

    async def scenario(conv: Conversation) -> None:
        last: list[str] = []
        for step in steps:
            ((name, arg),) = step.items()
            if name == "expect_turn":
                await conv.expect_turn()
            elif name == "say":
                await conv.say(str(arg))
            elif name == "speak":
                await conv.speak(float(arg))
            elif name == "tool_call":
                last = await conv.tool_call([(str(n), dict(a)) for n, a in arg])
            elif name == "wait_answers":
                await conv.wait_answers(last)
            elif name == "cancel":
                await conv.cancel(last)
            elif name == "go_away":
                await conv.go_away(str(arg))
            elif name == "resumption_update":
                await conv.resumption_update(resumable=bool(arg))
            elif name == "turn_complete":
                await conv.turn_complete()
            elif name == "interrupted":
                await conv.interrupted()
            elif name == "close":
                code, reason = arg
                await conv.close(int(code), str(reason))
            elif name == "send":
                await conv.send(dict(arg))
            elif name == "model":
                await RuleModel()(conv)
            else:
                raise ScenarioError(f"unknown step {name!r}")

    return scenario


def load_scenario(path: Path) -> Scenario:
    """Read a JSON list of steps from ``path``."""
    steps = msgspec.json.decode(path.read_bytes())
    if not isinstance(steps, list):
        raise ScenarioError(f"{path}: expected a JSON list of steps")
    return scenario_from_steps(steps)
