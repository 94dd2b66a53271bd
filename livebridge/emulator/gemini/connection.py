"""One emulated Live connection: reads client frames, sends server frames, keeps the turn state.

The model's side holds "the floor" while a turn is open; a pending BLOCKING call keeps it open (no
``turnComplete``), barge-in takes it away. Scenarios drive it through ``Conversation``; what the
service does on its own (re-issues, NON_BLOCKING reports, resumption updates) lives here, all of it
in the connection's one task group.

What the model does is its profile's (``livebridge.profiles``, the table the client reads too):
what an undeclared function means, whether calls carry ids (Vertex AI: not), whether new input
cancels a running BLOCKING call (``gemini-3.8-live``), whether ``INTERRUPT`` waits for the user,
which answer fields the backend refuses.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from typing import Any, Literal

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from livebridge import profiles
from livebridge.emulator.base import INTERNAL_ERROR, Connection
from livebridge.emulator.frames import Rejection, read_frame
from livebridge.emulator.gemini.checker import Answer, CallRecord, Checker
from livebridge.emulator.shared import (
    Report,
    Shared,
    TranscriptEntry,
    UserTurn,
    cap_reason,
    new_call_id,
    usage_metadata,
)
from livebridge.emulator.speech import spoken
from livebridge.emulator.voice import VoiceActivity, tone
from livebridge.vendors.gemini import wire

__all__ = [
    "DEADLINE_EXPIRED",
    "INTERNAL_ERROR",
    "CallsOnInterrupt",
    "EmulatedSession",
    "Report",
    "TranscriptEntry",
    "UserTurn",
    "cap_reason",
    "tone",
]

DEADLINE_EXPIRED = "Deadline expired before operation could complete."
MEDIA_CHUNKS_DEPRECATED = (
    "realtime_input.media_chunks is deprecated. Use audio, video, or text instead."
)
FRAME_SECONDS = 0.04
#: User turns the model has not taken yet, kept at most (the oldest goes first).
MAX_WAITING_TURNS = 64

#: What an interruption does to the turn's open calls: cancel them (``toolCallCancellation``),
#: withdraw them silently (as the service has been seen to), or keep them open.
CallsOnInterrupt = Literal["cancel", "withdraw", "keep"]
#: The rate of client audio whose mime type names none (the service assumes 16 kHz input).
INPUT_AUDIO_RATE = 16_000


class EmulatedSession(Connection):
    """The server side of one accepted connection."""

    checker: Checker

    def __init__(
        self,
        shared: Shared,
        ws: ServerConnection,
        session_id: str,
        *,
        path: str,
        api_version: str,
        auth: str,
        backend: profiles.Backend = "developer",
    ) -> None:
        super().__init__(shared, ws, session_id)
        self.path = path
        self.api_version = api_version
        self.auth = auth
        self.backend: profiles.Backend = backend
        vertex = backend == "vertex"
        self.profile = profiles.VERTEX_DEFAULT if vertex else profiles.DEVELOPER_DEFAULT
        self.setup = wire.Setup()
        self.resumed_from: str | None = None
        self.checker = self._new_checker(None)
        self.declarations: dict[str, wire.FunctionDeclaration] = {}
        self.turns: asyncio.Queue[UserTurn] = asyncio.Queue(MAX_WAITING_TURNS)
        self.reports: list[Report] = []
        self.generation = 0
        self.floor_owner: str | None = None
        self._reissued: set[str] = set()
        self._turn_calls: list[str] = []
        self._response_tokens = 0
        self._prompt_tokens = 0
        self.voice = VoiceActivity()

    @property
    def pending_calls(self) -> list[CallRecord]:
        """Calls issued and not yet answered, cancelled or superseded."""
        return self.checker.pending()

    @property
    def answered(self) -> dict[str, Answer]:
        """Answers received so far, by call id."""
        calls = self.checker.calls.values()
        return {record.id: record.answer for record in calls if record.answer is not None}

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

    def start(
        self,
        setup: wire.Setup,
        known: dict[str, CallRecord] | None,
        handle: str | None,
        profile: profiles.ModelProfile | None = None,
    ) -> None:
        """Adopt the client's setup (and, when resuming, the calls its handle knew), behaving
        as ``profile`` does (default: the backend's documented defaults)."""
        self.setup = setup
        self.resumed_from = handle
        self.voice = VoiceActivity.for_setup(setup)
        if profile is not None:
            self.profile = profile
        if known is not None:
            self.checker = self._new_checker(known)
        self.checker.call_ids = self.profile.call_ids
        self._declare(setup.tools or [])

    def _new_checker(self, known: dict[str, CallRecord] | None) -> Checker:
        options = self.shared.options
        return Checker(
            self.id,
            self.shared.report,
            check_audio_during_blocking=options.check_audio_during_blocking,
            thresholds=options.thresholds,
            known=known,
            call_ids=self.profile.call_ids,
        )

    def _declare(self, tools: list[wire.Tool]) -> None:
        """Adopt declarations; what the model would take differently from what they say is
        reported (a missing ``behavior`` where the default is not BLOCKING, a behavior the
        model does not have and ignores)."""
        self.declarations = {
            declaration.name: declaration
            for tool in tools
            for declaration in tool.function_declarations or []
        }
        profile = self.profile
        for name, declaration in self.declarations.items():
            if declaration.behavior is None and profile.undeclared_behavior != "BLOCKING":
                self.checker.flag(
                    "undeclared_behavior",
                    f"function {name!r} is declared without a behavior, which {profile.family} "
                    f"takes as {profile.undeclared_behavior}: state the behavior the client "
                    "answers it with",
                    wire.to_builtins(declaration),
                )
            elif declaration.behavior not in (None, *profile.behaviors):
                self.checker.flag(
                    "unsupported_behavior",
                    f"function {name!r} is declared {declaration.behavior}, which "
                    f"{profile.family} does not support: it runs as "
                    f"{profile.default_behavior}",
                    wire.to_builtins(declaration),
                    "warning",
                )

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
        faults = self.shared.faults
        async with self._send_lock:
            if faults.delay:
                await asyncio.sleep(faults.delay)
            dropped = faults.drop is not None and faults.drop(payload)
            self.shared.record(
                "server", self.id, {**payload, "dropped": True} if dropped else payload
            )
            if not dropped:
                await self.ws.send(wire.encode(payload))
            if faults.abort_after_tool_call and message.tool_call and not self._aborted:
                self.abort()

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
        ``toolCallCancellation`` (LIVE_PROTOCOL.md §7, Gemini forum thread 196216); the model then
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
        ``turnComplete`` until then, LIVE_PROTOCOL.md §4 [CB]), unless ``wait`` is False.
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
                server_content=wire.ServerContent(turn_complete=True),
                usage_metadata=usage
                or usage_metadata(self._prompt_tokens, self._response_tokens, self.modality),
            )
        )
        await self._release_floor()
        if self.setup.session_resumption is not None:
            await self.resumption_update(resumable=True)

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
        loop = asyncio.get_running_loop()
        start = loop.time()
        for index in range(max(1, round(seconds / FRAME_SECONDS))):
            if self.generation != generation or self.floor_owner != owner:
                return
            blob = wire.Blob(mime_type=blob_mime, data=wire.b64encode(frame))
            content = wire.ServerContent(
                model_turn=wire.Content(parts=[wire.Part(inline_data=blob)], role="model")
            )
            await self.send(wire.ServerMessage(server_content=content))
            self._response_tokens += 1
            await asyncio.sleep(max(0.0, start + (index + 1) * FRAME_SECONDS - loop.time()))

    async def interrupt(self, calls: CallsOnInterrupt, *, complete: bool = True) -> None:
        """The model's output is cut: ``interrupted``, then what ``calls`` says to the turn's
        open calls, then ``turnComplete`` (or, with ``complete=False``, the turn just ends).

        The service normally cancels the turn's calls, but has been seen to drop them without a
        ``toolCallCancellation`` (LIVE_PROTOCOL.md §7, Gemini forum thread 196216); the
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
            with contextlib.suppress(ConnectionClosed):  # the pong: the client read it
                pong = asyncio.ensure_future(await self.ws.ping())
                pong.add_done_callback(lambda _: self.checker.cancellation_read(named))
        await self._changed()

    async def issue_calls(
        self,
        owner: str,
        calls: list[tuple[str, dict[str, Any]]],
        ids: list[str | None] | None = None,
        *,
        reissue_of: str | None = None,
    ) -> list[str]:
        """Send one ``toolCall`` (under ``ids`` where given; ``reissue_of``: asking again)."""
        await self.open_turn(owner)
        return await self._send_tool_call(owner, calls, ids=ids, reissue_of=reissue_of)

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
        with contextlib.suppress(ConnectionClosed):  # the pong proves the client read the call
            pong = asyncio.ensure_future(await self.ws.ping())
            pong.add_done_callback(lambda _: self._read_by_client(batch))
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
            if not record.open or self.floor_owner != owner:
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

    async def handle_frame(self, frame: str | bytes) -> None:
        message = await self.decode(frame)
        if message is not None:
            await self.on_message(message)

    async def decode(self, frame: str | bytes) -> wire.ClientMessage | None:
        """Decode a frame; one the service would refuse closes the connection with 1007."""
        record, result = read_frame(frame)
        self.shared.record("client", self.id, record)
        if isinstance(result, Rejection):
            self.checker.flag(result.kind, result.reason, result.offending)
            await self.close(1007, result.reason)
            return None
        drop = self.shared.faults.drop_client
        return None if drop is not None and drop(record) else result

    async def _reject(
        self, reason: str, offending: dict[str, Any], kind: str = "malformed_message"
    ) -> None:
        self.checker.flag(kind, reason, offending)
        await self.close(1007, reason)

    def _refused_field(self, response: wire.ToolResponse) -> str | None:
        """The 1007 reason for an answer field this backend's proto does not have, if any:
        Vertex has no ``will_continue`` (google-genai refuses it in Vertex mode), and in 2025
        refused ``scheduling`` with this very reason (livekit/agents#3784)."""
        if self.backend != "vertex":
            return None
        for index, answer in enumerate(response.function_responses):
            for field, present, allowed in (
                ("will_continue", answer.will_continue is not None, self.profile.will_continue),
                ("scheduling", answer.scheduling is not None, bool(self.profile.schedulings)),
            ):
                if present and not allowed:
                    return (
                        f'Invalid JSON payload received. Unknown name "{field}" at '
                        f"'tool_response.function_responses[{index}]': Cannot find field."
                    )
        return None

    async def on_message(self, message: wire.ClientMessage) -> None:
        raw = wire.to_builtins(message)
        if message.tool_response is not None:
            await self._on_tool_response(raw, message.tool_response)
        elif message.client_content is not None:
            await self._on_client_content(message.client_content)
        elif message.realtime_input is not None:
            await self._on_realtime_input(raw, message.realtime_input)
        elif message.context_update is not None:
            if message.context_update.tools is not None:
                self._declare(message.context_update.tools.tools)
        elif message.setup is not None:
            self.checker.flag("malformed_message", "setup sent twice", raw)
            await self.close(1007, "Invalid JSON payload received. setup may only be sent once.")

    async def _on_tool_response(self, raw: dict[str, Any], response: wire.ToolResponse) -> None:
        refused = self._refused_field(response)
        if refused is not None:
            await self._reject(refused, raw, "unsupported_field")
            return
        accepted = self.checker.on_tool_response(raw, response.function_responses)
        for record, answer in accepted:
            # BLOCKING: ``scheduling`` is ignored (LIVE_PROTOCOL.md §7, livekit agents PR #6600).
            if record.blocking or not answer.response:
                continue
            scheduling = answer.scheduling or "WHEN_IDLE"
            if scheduling == "SILENT":
                self.reports.append(Report(record.id, scheduling, time.monotonic()))
            else:
                self.spawn(self._report(record, answer.response, scheduling))
        await self._changed()

    async def _report(self, record: CallRecord, response: dict[str, Any], scheduling: str) -> None:
        if scheduling == "INTERRUPT" and self.profile.interrupt_waits_for_user:
            await self.wait_until(lambda: not self.voice.speaking)  # no talking over the user
        if scheduling == "INTERRUPT":
            await self.interrupt("keep")
        owner = f"report:{record.id}:{len(self.reports)}"
        await self.open_turn(owner)
        self.reports.append(Report(record.id, scheduling, time.monotonic()))
        await self.say(owner, f"{record.name} says {spoken(response)}")
        await self.complete_turn(owner)

    async def _on_client_content(self, content: wire.ClientContent) -> None:
        texts = [part.text for turn in content.turns or [] for part in turn.parts if part.text]
        self._prompt_tokens += sum(len(text) // 4 + 1 for text in texts)
        if content.turn_complete:
            await self._new_input()
            self._heard(UserTurn("text", " ".join(texts)))
            await self._changed()

    async def _new_input(self) -> None:
        """The user said something new: on a model that cancels running BLOCKING calls for it
        (``gemini-3.8-live``), they are cancelled."""
        if not self.profile.input_cancels_blocking:
            return
        blocking = [record.id for record in self.checker.blocking_pending()]
        if blocking:
            await self.cancel_calls(blocking)

    async def _on_realtime_input(self, raw: dict[str, Any], realtime: wire.RealtimeInput) -> None:
        if realtime.text is not None:
            self._prompt_tokens += len(realtime.text) // 4 + 1
            await self._new_input()
            self._heard(UserTurn("text", realtime.text))
        elif realtime.activity_start is not None:
            self.voice.manual = True
            await self._new_input()
            await self.barge_in()
        elif realtime.activity_end is not None:
            self.voice.manual = False
            await self._end_audio_turn(force=True)
        elif realtime.audio_stream_end:
            await self._end_audio_turn(force=False)
        elif realtime.audio is not None:
            await self._on_audio(raw, realtime.audio)
        elif realtime.media_chunks:
            # 3.x models refuse the deprecated form with 1007 (LIVE_PROTOCOL.md §2,
            # kizuna-ai-lab/sokuji#150, close code per aicc2025/sip-to-ai#5); 2.x still take it.
            if not self.profile.media_chunks:
                self.checker.flag("deprecated_media_chunks", MEDIA_CHUNKS_DEPRECATED, raw, "error")
                await self.close(1007, MEDIA_CHUNKS_DEPRECATED)
                return
            self.checker.flag("deprecated_media_chunks", MEDIA_CHUNKS_DEPRECATED, raw)
            for blob in realtime.media_chunks:
                if (blob.mime_type or "").startswith("audio/"):
                    await self._on_audio(raw, blob)
        await self._changed()

    async def _on_audio(self, raw: dict[str, Any], blob: wire.Blob) -> None:
        self.checker.on_audio(raw)
        try:
            pcm = wire.b64decode(blob.data)
        except wire.WireError as error:
            await self._reject(error.reason, raw)
            return
        seconds = len(pcm) / 2 / wire.audio_rate(blob.mime_type, INPUT_AUDIO_RATE)
        self._prompt_tokens += max(1, round(seconds * 25))
        heard = self.voice.hear(pcm, seconds, model_talking=self.turn_open)
        if heard == "barge_in":
            await self._new_input()
            await self.barge_in()
        elif heard == "end_of_turn":
            await self._end_audio_turn(force=False)

    async def _end_audio_turn(self, *, force: bool) -> None:
        spoken = self.voice.end(force=force)
        if spoken is not None:
            self._heard(UserTurn("audio", None, spoken))

    def _heard(self, turn: UserTurn) -> None:
        """Queue a user turn; past ``MAX_WAITING_TURNS`` the oldest goes (reading never waits)."""
        if self.turns.full():
            self.turns.get_nowait()
        self.turns.put_nowait(turn)
