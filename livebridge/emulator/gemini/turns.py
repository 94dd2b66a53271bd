"""The model's side of one emulated Gemini Live connection: the floor, what the model says and
calls in its turns, and what the service does on its own (re-issues, resumption updates, goAway).

The model's side holds "the floor" while a turn is open; a pending BLOCKING call keeps it open (no
``turnComplete``) unless the profile ends the turn right after a call (native audio 2.5),
barge-in takes it away. Scenarios drive it through ``Conversation``; all of it
runs in the connection's one task group. ``EmulatedSession`` adds the client's messages.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any, Literal

from websockets.asyncio.server import ServerConnection

from livebridge import profiles
from livebridge.emulator.base import FRAME_SECONDS, Connection, frame_count, pace
from livebridge.emulator.gemini.checker import Checker
from livebridge.emulator.shared import Report, Shared, new_call_id, usage_metadata
from livebridge.emulator.voice import tone
from livebridge.protocol.encoding import b64encode
from livebridge.vendors.gemini import wire

DEADLINE_EXPIRED = "Deadline expired before operation could complete."

#: What an interruption does to the turn's open calls: cancel them (``toolCallCancellation``),
#: withdraw them silently (as the service has been seen to), or keep them open.
CallsOnInterrupt = Literal["cancel", "withdraw", "keep"]


class ModelTurns(Connection):
    """The model's turns on one connection; ``EmulatedSession`` adds the client's messages."""

    checker: Checker

    def __init__(
        self, shared: Shared, ws: ServerConnection, session_id: str, profile: profiles.ModelProfile
    ) -> None:
        super().__init__(shared, ws, session_id)
        self.profile = profile
        self.setup = wire.Setup()
        self.declarations: dict[str, wire.FunctionDeclaration] = {}
        self.reports: list[Report] = []
        self.generation = 0
        self.floor_owner: str | None = None
        self._reissued: set[str] = set()
        self._turn_calls: list[str] = []
        self._response_tokens = 0
        self._prompt_tokens = 0

    @property
    def model(self) -> str:
        """The model name of the setup, without ``models/``."""
        return self.setup.model.removeprefix("models/")

    @property
    def turn_open(self) -> bool:
        return self.floor_owner is not None

    @property
    def modality(self) -> str:
        config = self.setup.generation_config
        modalities = (
            config.response_modalities if config else None
        ) or self.setup.response_modalities
        return (modalities or ["AUDIO"])[0].upper()

    def is_blocking(self, name: str) -> bool:
        """Whether the model waits for this function's answer, as the service decides it."""
        declaration = self.declarations.get(name)
        behavior = declaration.behavior if declaration is not None else None
        if behavior not in self.profile.behaviors:  # undeclared, or one the model lacks
            behavior = self.profile.undeclared_behavior
            if behavior not in self.profile.behaviors:
                behavior = self.profile.default_behavior
        return behavior == "BLOCKING"

    async def send(self, message: wire.ServerMessage) -> None:
        """Send one server frame (binary, camelCase), through the configured faults."""
        payload = wire.to_builtins(message)
        await self.send_frame(
            payload, wire.encode(payload), tool_call=message.tool_call is not None
        )

    async def open_turn(self, owner: str) -> None:
        """Take the floor for ``owner`` (waits while someone else holds it)."""
        async with self._cond:
            await self._cond.wait_for(lambda: self.floor_owner in (None, owner))
            if self.floor_owner == owner:
                return
            self.floor_owner = owner
            self._turn_calls = []
            self._response_tokens = 0
        if self.shared.options.reissue_next_turn:
            await self._reissue_left_over(owner)

    async def _reissue_left_over(self, owner: str) -> None:
        """Ask again, under new ids, the BLOCKING calls an interruption left unanswered.

        The service has been seen to drop a pending call when a turn is interrupted without a
        ``toolCallCancellation`` (Gemini developer forum thread 196216); the model then
        asks the same question in its next turn (DESIGN.md: a re-issue).
        """
        for record in list(self.checker.calls.values()):
            root = record.reissue_of or record.id
            if record.state != "withdrawn" or not record.blocking or root in self._reissued:
                continue
            self._reissued.add(root)
            await self._send_tool_call(owner, [(record.name, record.args)], reissue_of=root)

    async def complete_turn(
        self,
        owner: str,
        usage: wire.UsageMetadata | None = None,
        *,
        interrupted: bool = False,
        wait: bool = True,
    ) -> None:
        """End ``owner``'s turn: ``turnComplete`` with usage.

        It waits while a BLOCKING call of the turn is unanswered, as the service does (no
        ``turnComplete`` until then: google-gemini/cookbook, Get_started_LiveAPI_tools),
        unless ``wait`` is False.
        """
        if wait and not interrupted:
            await self.wait_until(lambda: self.floor_owner != owner or not self._turn_blocked())
        if self.floor_owner != owner:
            return
        if not interrupted:
            await self.send(
                wire.ServerMessage(server_content=wire.ServerContent(generation_complete=True))
            )
        await self.send(
            wire.ServerMessage(
                server_content=wire.ServerContent(
                    turn_complete=True, interaction_status=self._interaction_status(owner)
                ),
                usage_metadata=usage
                or usage_metadata(self._prompt_tokens, self._response_tokens, self.modality),
            )
        )
        await self._release_floor()
        if self.setup.session_resumption is not None:
            await self.resumption_update(resumable=True)

    def _interaction_status(self, owner: str) -> str | None:
        """What ``turnComplete`` says of the session, on a model that says it
        (``interaction_status``): ``IN_PROGRESS`` while a NON_BLOCKING call is unanswered or
        an answer's report is still to be spoken, ``IDLE`` otherwise."""
        if not self.profile.interaction_status:
            return None
        waiting = any(record.open and not record.blocking for record in self.checker.calls.values())
        return "IN_PROGRESS" if waiting or self._reports_due(owner) else "IDLE"

    def _reports_due(self, owner: str) -> bool:
        """Whether an answer's report other than ``owner``'s is still to be spoken."""
        return False

    async def _release_floor(self) -> None:
        async with self._cond:
            self.floor_owner = None
            self._cond.notify_all()
        self.shared.notify()

    def _turn_blocked(self) -> bool:
        calls = self.checker.calls
        return any(calls[i].blocking and calls[i].open for i in self._turn_calls)

    async def say(self, owner: str, text: str) -> None:
        """Model text: ``outputTranscription`` in an AUDIO session, a text part otherwise."""
        await self.open_turn(owner)
        self._response_tokens += max(1, len(text) // 4)
        if self.modality == "AUDIO":
            content = wire.ServerContent(output_transcription=wire.Transcription(text=text))
        else:
            content = wire.ServerContent(
                model_turn=wire.Content(parts=[wire.Part(text=text)], role="model")
            )
        await self.send(wire.ServerMessage(server_content=content))

    async def speak(self, owner: str, seconds: float, rate: int = 24000) -> None:
        """Model audio in 40 ms frames at real-time pace; stops early when interrupted."""
        await self.open_turn(owner)
        generation = self.generation
        frame = tone(FRAME_SECONDS, rate)
        blob_mime = f"audio/pcm;rate={rate}"
        start = asyncio.get_running_loop().time()
        for index in range(frame_count(seconds)):
            if self.generation != generation or self.floor_owner != owner:
                return
            blob = wire.Blob(mime_type=blob_mime, data=b64encode(frame))
            content = wire.ServerContent(
                model_turn=wire.Content(parts=[wire.Part(inline_data=blob)], role="model")
            )
            await self.send(wire.ServerMessage(server_content=content))
            self._response_tokens += 1
            await pace(start, index)

    async def interrupt(self, calls: CallsOnInterrupt, *, complete: bool = True) -> None:
        """The model's output is cut: ``interrupted``, then what ``calls`` says to the turn's
        open calls, then ``turnComplete`` (or, with ``complete=False``, the turn just ends).

        The service normally cancels the turn's calls, but has been seen to drop them without a
        ``toolCallCancellation`` (Gemini developer forum thread 196216); the
        ``generationComplete`` docstring says an interrupted turn ends "interrupted >
        turn_complete" (§3).
        """
        owner = self.floor_owner
        if owner is None:
            return
        self.generation += 1
        await self.send(wire.ServerMessage(server_content=wire.ServerContent(interrupted=True)))
        ids = [i for i in self._turn_calls if self.checker.calls[i].open]
        if ids and calls == "cancel":
            await self.cancel_calls(ids)
        elif ids and calls == "withdraw":
            self.checker.withdraw(ids)
        if complete:
            await self.complete_turn(owner, interrupted=True)
        else:
            await self._release_floor()

    async def barge_in(self) -> None:
        """The user spoke over the model: interrupt as the options say."""
        cancel = self.shared.options.cancel_on_interrupt
        await self.interrupt("cancel" if cancel else "withdraw")

    async def cancel_calls(self, ids: list[str]) -> None:
        """``toolCallCancellation`` for these calls; a call issued without an id cannot be
        named in one: it is cancelled all the same, with nothing sent."""
        self.checker.cancel(ids)
        calls = self.checker.calls
        named = [i for i in ids if i not in calls or not calls[i].nameless]
        if named:
            cancellation = wire.ToolCallCancellation(ids=named)
            await self.send(wire.ServerMessage(tool_call_cancellation=cancellation))
            await self.ping_then(lambda _: self.checker.cancellation_read(named))  # it read it
        await self._changed()

    async def issue_calls(
        self,
        owner: str,
        calls: list[tuple[str, dict[str, Any]]],
        ids: list[str | None] | None = None,
        *,
        reissue_of: str | None = None,
    ) -> list[str]:
        """Send one ``toolCall`` (under ``ids`` where given; ``reissue_of``: asking again).

        On a model that ends its turn after a call (``turn_complete_after_call``: native audio
        2.5), ``turnComplete`` follows at once, BLOCKING calls or not; the answers are then
        spoken in a turn of their own.
        """
        await self.open_turn(owner)
        issued = await self._send_tool_call(owner, calls, ids=ids, reissue_of=reissue_of)
        if self.profile.turn_complete_after_call:
            await self.complete_turn(owner, wait=False)
        return issued

    async def _send_tool_call(
        self,
        owner: str,
        calls: list[tuple[str, dict[str, Any]]],
        *,
        ids: list[str | None] | None = None,
        reissue_of: str | None = None,
    ) -> list[str]:
        chosen = ids or [None] * len(calls)
        nameless = not self.profile.call_ids  # Vertex: answered by name, in call order
        new_id = self.checker.nameless_key if nameless else new_call_id
        specs = [
            (call_id or new_id(), name, args, self.is_blocking(name))
            for call_id, (name, args) in zip(chosen, calls, strict=True)
        ]
        batch = self.checker.issue(specs, reissue_of=reissue_of, nameless=nameless)
        self._turn_calls.extend(spec[0] for spec in specs)
        function_calls = [
            wire.FunctionCall(id=None if nameless else i, name=n, args=a) for i, n, a, _ in specs
        ]
        await self.send(wire.ServerMessage(tool_call=wire.ToolCall(function_calls=function_calls)))
        await self.ping_then(lambda _: self._read_by_client(batch))  # the client read the call
        if self.setup.session_resumption is not None:
            await self.resumption_update(resumable=False)
        reissue_after = self.shared.options.reissue_after
        if reissue_after is not None and reissue_of is None:
            for call_id, _, _, blocking in specs:
                if blocking:
                    self.spawn(self._reissue(owner, call_id, reissue_after))
        await self._changed()
        return [spec[0] for spec in specs]

    def _read_by_client(self, batch: int) -> None:
        self.checker.read(batch)
        self.shared.notify()

    async def _reissue(self, owner: str, root: str, delay: float) -> None:
        current = root
        while True:
            await asyncio.sleep(delay)
            record = self.checker.calls[current]
            if not record.open:
                return
            if self.profile.turn_complete_after_call:  # the turn ended with the call
                (current,) = await self.issue_calls(
                    owner, [(record.name, record.args)], reissue_of=root
                )
                continue
            if self.floor_owner != owner:
                return
            (current,) = await self._send_tool_call(
                owner, [(record.name, record.args)], reissue_of=root
            )

    async def resumption_update(self, *, resumable: bool = True) -> str | None:
        """Send ``sessionResumptionUpdate``; never resumable while calls are pending."""
        if resumable and not self.checker.pending():
            handle = f"emu-{random.getrandbits(64):016x}"
            # No call is open, and settled records never change: a shallow copy is a snapshot.
            self.shared.keep_handle(handle, dict(self.checker.calls))
            update = wire.SessionResumptionUpdate(new_handle=handle, resumable=True)
        else:
            handle = None
            update = wire.SessionResumptionUpdate(new_handle="", resumable=False)
        await self.send(wire.ServerMessage(session_resumption_update=update))
        return handle

    async def go_away(self, time_left: str) -> None:
        """Send ``goAway``, then close 1011 when ``time_left`` runs out."""
        seconds = wire.parse_duration(time_left)
        await self.send(wire.ServerMessage(go_away=wire.GoAway(time_left=time_left)))
        self.spawn(self._close_later(seconds, 1011, DEADLINE_EXPIRED))

    async def _close_later(self, seconds: float, code: int, reason: str) -> None:
        await asyncio.sleep(seconds)
        await self.close(code, reason)
