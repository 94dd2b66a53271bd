"""Scripting a conversation step by step: the ``Conversation`` a scenario is given.

A scenario is ``async def scenario(conv: Conversation) -> None``, run once per accepted connection
after the opening exchange (Gemini ``setupComplete``, OpenAI ``session.created``). A scenario can
also be a JSON list of one-key steps (``--scenario FILE``, see ``livebridge.emulator.steps``).

The same scenario plays on either protocol: ``Conversation`` talks to the connection through
``ModelSide``, which both connection types provide. On OpenAI Realtime a ``tool_call`` is one
response with N ``function_call`` items; ``cancel``/``interrupted`` end that response
``cancelled``; Gemini-only steps (``go_away``, ``resumption_update``) raise ``ScenarioError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, Protocol

import msgspec

from livebridge.emulator.contract import Answer, CallRecord
from livebridge.emulator.gemini.connection import EmulatedSession
from livebridge.emulator.openai.connection import RealtimeSession
from livebridge.emulator.shared import UserTurn
from livebridge.errors import ScenarioError
from livebridge.vendors.gemini import wire

_OWNER = "model"


class CallBook(Protocol):
    """What a scenario reads of a connection's calls."""

    @property
    def calls(self) -> dict[str, CallRecord]: ...

    def resolved_answer(self, call_id: str) -> Answer | None: ...


class ModelSide(Protocol):
    """What ``Conversation`` needs of a connection, whatever protocol it speaks."""

    @property
    def checker(self) -> CallBook: ...

    @property
    def turns(self) -> asyncio.Queue[UserTurn]: ...

    @property
    def declarations(self) -> dict[str, wire.FunctionDeclaration]: ...

    @property
    def modality(self) -> str: ...

    async def say(self, owner: str, text: str) -> None: ...

    async def speak(self, owner: str, seconds: float, rate: int = 24000) -> None: ...

    async def cancel_calls(self, ids: list[str]) -> None: ...

    async def wait_until(
        self,
        predicate: Callable[[], bool],
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> None: ...

    async def send_raw(self, frame: bytes) -> None: ...

    async def close(self, code: int = 1000, reason: str = "") -> None: ...


class Conversation:
    """The model's side of one connection, one step at a time."""

    def __init__(self, session: EmulatedSession | RealtimeSession) -> None:
        self._connection = session

    @property
    def protocol(self) -> str:
        """``"gemini"`` or ``"openai"``: the protocol this connection speaks."""
        return "openai" if isinstance(self._connection, RealtimeSession) else "gemini"

    @property
    def session(self) -> EmulatedSession:
        """The Gemini connection (on OpenAI, ``realtime``)."""
        if isinstance(self._connection, EmulatedSession):
            return self._connection
        raise ScenarioError(
            "conv.session is the Gemini Live connection; on OpenAI Realtime use conv.realtime "
            "(or conv.wait_until, which works on both)"
        )

    @property
    def realtime(self) -> RealtimeSession:
        """The OpenAI Realtime connection (on Gemini, ``session``)."""
        if isinstance(self._connection, RealtimeSession):
            return self._connection
        raise ScenarioError("conv.realtime is the OpenAI Realtime connection; use conv.session")

    @property
    def modality(self) -> str:
        """``AUDIO`` or ``TEXT``: how the model answers on this connection."""
        return self._side.modality

    @property
    def parallel_calls(self) -> bool:
        """Whether one turn may carry several calls: on OpenAI not when the session says
        ``parallel_tool_calls: false`` (the openai SDK documents the field for reasoning
        realtime models such as ``gpt-realtime-2``); then the model calls one tool per
        response and the next in the response that continues it."""
        session = self._connection
        if isinstance(session, RealtimeSession):
            return session.config.parallel_tool_calls is not False
        return True

    @property
    def _side(self) -> ModelSide:
        return self._connection

    def _gemini(self, step: str) -> EmulatedSession:
        if isinstance(self._connection, EmulatedSession):
            return self._connection
        raise ScenarioError(f"{step} is Gemini Live only; OpenAI Realtime has no such thing")

    @property
    def resumed_from(self) -> str | None:
        """The resumption handle this connection was opened with, if any (Gemini)."""
        session = self._connection
        return session.resumed_from if isinstance(session, EmulatedSession) else None

    @property
    def known_calls(self) -> dict[str, CallRecord]:
        """Every call this session knows about (inherited ones included when resumed)."""
        return self._side.checker.calls

    @property
    def setup(self) -> wire.Setup:
        """The client's Gemini ``setup`` (on OpenAI read ``conv.realtime.config``)."""
        return self._gemini("setup").setup

    @property
    def declarations(self) -> dict[str, wire.FunctionDeclaration]:
        """The functions the client declared, by name."""
        return self._side.declarations

    async def wait_until(
        self,
        predicate: Callable[[], bool],
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> None:
        """Wait until ``predicate()`` holds, re-checked whenever this connection's state changes
        (a client event, a call answered); ``TimeoutError`` after ``timeout`` seconds."""
        await self._side.wait_until(predicate, timeout)

    async def expect_turn(self, timeout: float | None = None) -> UserTurn:  # noqa: ASYNC109
        """Wait for the next finished user turn (text, or audio ended by silence or a marker;
        on OpenAI, user input followed by ``response.create`` or the server's turn detection)."""
        async with asyncio.timeout(timeout):
            return await self._side.turns.get()

    async def heard(self, text: str) -> None:
        """Transcribe the user's last audio as ``text``, if the client asked for transcripts."""
        session = self._connection
        if isinstance(session, RealtimeSession):
            await session.transcribe(text)
        elif session.setup.input_audio_transcription is not None:
            await self.send(
                {"serverContent": {"inputTranscription": {"text": text, "finished": True}}}
            )

    async def say(self, text: str) -> None:
        await self._side.say(_OWNER, text)

    async def speak(self, seconds: float, rate: int = 24000) -> None:
        await self._side.speak(_OWNER, seconds, rate)

    async def tool_call(
        self,
        calls: Sequence[tuple[str, dict[str, Any]]],
        ids: Sequence[str | None] | None = None,
    ) -> list[str]:
        """Send one ``toolCall`` (OpenAI: one response's ``function_call`` items) with every
        call; returns the ids (``ids`` where given, else the service's form)."""
        return await self._connection.issue_calls(_OWNER, list(calls), list(ids) if ids else None)

    async def tool_call_raw(self, name: str, arguments: str, call_id: str | None = None) -> str:
        """OpenAI: one ``function_call`` whose ``arguments`` string is sent verbatim (even if it
        is not JSON), for testing how clients take bad server input."""
        session = self._connection
        if not isinstance(session, RealtimeSession):
            raise ScenarioError("tool_call_raw is an OpenAI Realtime step (Gemini args are JSON)")
        (issued,) = await session.issue_calls(_OWNER, [(name, arguments)], [call_id])
        return issued

    async def wait_answers(
        self,
        ids: Sequence[str],
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> dict[str, Answer]:
        """Wait until each call is answered (finally, for streams), cancelled or withdrawn;
        ``TimeoutError`` after ``timeout`` seconds. On OpenAI the response carrying the calls
        first ends ``completed``."""
        side = self._side
        if isinstance(self._connection, RealtimeSession):
            await self._connection.end_calls(list(ids))

        def settled() -> bool:
            return all(not side.checker.calls[i].open for i in ids)

        await side.wait_until(settled, timeout)
        answers = {i: side.checker.resolved_answer(i) for i in ids}
        return {i: answer for i, answer in answers.items() if answer is not None}

    async def cancel(self, ids: Sequence[str]) -> None:
        """Gemini: ``toolCallCancellation``. OpenAI: the response carrying the calls ends
        ``cancelled`` (only while it is in progress, before ``wait_answers``)."""
        await self._side.cancel_calls(list(ids))

    async def go_away(self, time_left: str = "5s") -> None:
        await self._gemini("go_away").go_away(time_left)

    async def resumption_update(self, *, resumable: bool = True) -> str | None:
        """Send ``sessionResumptionUpdate``; returns the new handle (None if not resumable)."""
        return await self._gemini("resumption_update").resumption_update(resumable=resumable)

    async def turn_complete(
        self, usage: dict[str, Any] | None = None, *, wait: bool = True
    ) -> None:
        """End the turn; waits while a BLOCKING call of the turn is unanswered, unless ``wait``
        is False (``turnComplete`` goes out at once, the calls stay open). On OpenAI the
        response ends ``completed``."""
        session = self._connection
        if isinstance(session, RealtimeSession):
            await session.complete_turn(_OWNER, usage, wait=wait)
            return
        metadata = msgspec.convert(usage, wire.UsageMetadata) if usage is not None else None
        await session.complete_turn(_OWNER, metadata, wait=wait)

    async def end_response(
        self,
        status: Literal["completed", "cancelled", "incomplete"] = "completed",
        reason: str | None = None,
    ) -> None:
        """OpenAI: end the active response with ``status`` (``incomplete`` with reason
        ``max_output_tokens``, say): its calls are then not to be answered unless completed."""
        session = self._connection
        if not isinstance(session, RealtimeSession):
            raise ScenarioError("end_response is OpenAI Realtime only; Gemini ends turns")
        await session.end_response(status, reason=reason)

    async def interrupted(self, *, cancel: bool = False, turn_complete: bool = True) -> None:
        """The model stops talking: ``interrupted``, then ``turnComplete`` (unless
        ``turn_complete`` is False). The turn's open calls get a ``toolCallCancellation`` with
        ``cancel``; without it they are dropped silently, as the service has been seen to do.
        On OpenAI: ``input_audio_buffer.speech_started``, and the response ends ``cancelled``."""
        await self._connection.interrupt("cancel" if cancel else "withdraw", complete=turn_complete)

    async def send(self, message: dict[str, Any]) -> None:
        """Send any server message as given (Gemini: a camelCase JSON object converted to a
        ``ServerMessage``; OpenAI: any JSON object, even an event type the SDK does not know)."""
        session = self._connection
        if isinstance(session, RealtimeSession):
            await session.send(message)
        else:
            await session.send(msgspec.convert(message, wire.ServerMessage))

    async def send_raw(self, frame: bytes) -> None:
        """Send a frame exactly as given, even one that is not valid JSON."""
        await self._side.send_raw(frame)

    async def close(self, code: int = 1000, reason: str = "") -> None:
        await self._side.close(code, reason)


Scenario = Callable[[Conversation], Awaitable[None]]
