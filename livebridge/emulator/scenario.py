"""Scripting a conversation step by step: the ``Conversation`` a scenario is given.

A scenario is ``async def scenario(conv: Conversation) -> None``, run once per accepted connection
after ``setupComplete``. A scenario can also be a JSON list of one-key steps (``--scenario FILE``,
see ``livebridge.emulator.steps``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import msgspec

from livebridge import wire
from livebridge.emulator.checker import Answer, CallRecord
from livebridge.emulator.connection import EmulatedSession, UserTurn
from livebridge.errors import UsageError

__all__ = ["Conversation", "Scenario", "ScenarioError"]

_OWNER = "model"


class ScenarioError(UsageError):
    """A scenario cannot be played: a malformed step (named by its index) or an unreadable file."""


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

    async def tool_call(
        self,
        calls: Sequence[tuple[str, dict[str, Any]]],
        ids: Sequence[str | None] | None = None,
    ) -> list[str]:
        """Send one ``toolCall`` with every call; returns the ids (``ids`` where given, else
        ``function-call-<u64>``)."""
        return await self.session.issue_calls(_OWNER, list(calls), list(ids) if ids else None)

    async def wait_answers(
        self,
        ids: Sequence[str],
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> dict[str, Answer]:
        """Wait until each call is answered (finally, for streams), cancelled or withdrawn;
        ``TimeoutError`` after ``timeout`` seconds."""
        session = self.session

        def settled() -> bool:
            return all(not session.checker.calls[i].open for i in ids)

        await session.wait_until(settled, timeout)
        answers = {i: session.checker.resolved_answer(i) for i in ids}
        return {i: answer for i, answer in answers.items() if answer is not None}

    async def cancel(self, ids: Sequence[str]) -> None:
        await self.session.cancel_calls(list(ids))

    async def go_away(self, time_left: str = "5s") -> None:
        await self.session.go_away(time_left)

    async def resumption_update(self, *, resumable: bool = True) -> str | None:
        """Send ``sessionResumptionUpdate``; returns the new handle (None if not resumable)."""
        return await self.session.resumption_update(resumable=resumable)

    async def turn_complete(
        self, usage: dict[str, Any] | None = None, *, wait: bool = True
    ) -> None:
        """End the turn; waits while a BLOCKING call of the turn is unanswered, unless ``wait``
        is False (``turnComplete`` goes out at once, the calls stay open)."""
        metadata = msgspec.convert(usage, wire.UsageMetadata) if usage is not None else None
        await self.session.complete_turn(_OWNER, metadata, wait=wait)

    async def interrupted(self, *, cancel: bool = False, turn_complete: bool = True) -> None:
        """The model stops talking: ``interrupted``, then ``turnComplete`` (unless
        ``turn_complete`` is False). The turn's open calls get a ``toolCallCancellation`` with
        ``cancel``; without it they are dropped silently, as the service has been seen to do."""
        await self.session.interrupt("cancel" if cancel else "withdraw", complete=turn_complete)

    async def send(self, message: dict[str, Any]) -> None:
        """Send any server message as given (camelCase JSON object)."""
        await self.session.send(msgspec.convert(message, wire.ServerMessage))

    async def send_raw(self, frame: bytes) -> None:
        """Send a frame exactly as given, even one that is not valid JSON."""
        await self.session.send_raw(frame)

    async def close(self, code: int = 1000, reason: str = "") -> None:
        await self.session.close(code, reason)


Scenario = Callable[[Conversation], Awaitable[None]]
