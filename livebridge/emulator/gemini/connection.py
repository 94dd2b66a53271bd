"""One emulated Live connection: the client's messages in, the checks on them, the user's turns.

Each client frame is decoded as the service would (one it refuses closes the connection with
1007), judged by the contract checker, and acted on: answers settle calls (a NON_BLOCKING one is
reported to the model as its ``scheduling`` says), text and audio become user turns (with the
service's voice activity detection), activity signals barge in. The model's side lives in
``ModelTurns`` (``livebridge.emulator.gemini.turns``).

What the model does is its profile's (``livebridge.profiles``, the table the client reads too):
what an undeclared function means, whether calls carry ids (Vertex AI: not), whether new input
cancels a running BLOCKING call (``gemini-3.8-live``), whether ``INTERRUPT`` waits for the user,
which answer fields the backend refuses.
"""

from __future__ import annotations

import time
from typing import Any

from websockets.asyncio.server import ServerConnection

from livebridge import profiles
from livebridge.emulator.contract import CallRecord
from livebridge.emulator.gemini.checker import Checker
from livebridge.emulator.gemini.turns import ModelTurns
from livebridge.emulator.judging import Rejection, read_frame
from livebridge.emulator.shared import Report, Shared, UserTurn
from livebridge.emulator.speech import spoken
from livebridge.emulator.voice import VoiceActivity
from livebridge.errors import WireError
from livebridge.protocol.encoding import b64decode
from livebridge.vendors.gemini import wire

MEDIA_CHUNKS_DEPRECATED = (
    "realtime_input.media_chunks is deprecated. Use audio, video, or text instead."
)
#: The rate of client audio whose mime type names none (the service assumes 16 kHz input).
INPUT_AUDIO_RATE = 16_000


class EmulatedSession(ModelTurns):
    """The server side of one accepted connection."""

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
        vertex = backend == "vertex"
        profile = profiles.VERTEX_DEFAULT if vertex else profiles.DEVELOPER_DEFAULT
        super().__init__(shared, ws, session_id, profile)
        self.path = path
        self.api_version = api_version
        self.auth = auth
        self.backend: profiles.Backend = backend
        self.resumed_from: str | None = None
        self.checker = self._new_checker(None)
        self.voice = VoiceActivity()
        #: Seeding the initial history (``historyConfig``): clientContent up to turnComplete.
        self.seeding = False
        #: The seeded history's last user words, which the turn the client starts answers.
        self.seeded: str | None = None
        #: The turns still to report NON_BLOCKING answers (``interactionStatus`` waits for them).
        self._due: set[str] = set()

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
        history = setup.history_config
        self.seeding = bool(history and history.initial_history_in_client_content)
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
        return None if self.lost(record) else result

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
            # BLOCKING: ``scheduling`` is ignored (livekit/agents PR #6600).
            if record.blocking or not answer.response:
                continue
            scheduling = answer.scheduling or "WHEN_IDLE"
            if answer.scheduling is not None and self.profile.scheduling_ignored:
                # Documented as unsupported (gemini-3.8-live-extended-thinking): not obeyed.
                self.checker.flag(
                    "unsupported_field",
                    f"scheduling {answer.scheduling} on call {record.id}: {self.profile.family} "
                    "does not support scheduling; the answer is reported when the model is idle",
                    raw,
                    "warning",
                )
                scheduling = "WHEN_IDLE"
            if scheduling == "SILENT":
                self.reports.append(Report(record.id, scheduling, time.monotonic()))
            else:
                owner = f"report:{record.id}:{len(self.reports)}:{len(self._due)}"
                self._due.add(owner)
                self.spawn(self._report(owner, record, answer.response, scheduling))
        await self._changed()

    def _reports_due(self, owner: str) -> bool:
        return bool(self._due - {owner})

    async def _report(
        self, owner: str, record: CallRecord, response: dict[str, Any], scheduling: str
    ) -> None:
        try:
            if scheduling == "INTERRUPT" and self.profile.interrupt_waits_for_user:
                await self.wait_until(lambda: not self.voice.speaking)  # no talking over the user
            if scheduling == "INTERRUPT":
                await self.interrupt("keep")
            await self.open_turn(owner)
            self.reports.append(Report(record.id, scheduling, time.monotonic()))
            await self.say(owner, f"{record.name} says {spoken(response)}")
            await self.complete_turn(owner)
        finally:
            self._due.discard(owner)

    async def _on_client_content(self, content: wire.ClientContent) -> None:
        texts = [part.text for turn in content.turns or [] for part in turn.parts if part.text]
        self._prompt_tokens += sum(len(text) // 4 + 1 for text in texts)
        if self.seeding:
            await self._seed(content, texts)
        elif content.turn_complete:
            await self._new_input()
            self.queue_turn(UserTurn("text", " ".join(texts)))
            await self._changed()

    async def _seed(self, content: wire.ClientContent, texts: list[str]) -> None:
        """The initial history (``historyConfig.initialHistoryInClientContent``): it ends at
        ``turnComplete``; whether that starts a turn is the profile's
        (``history_seed_starts_turn``: 2.5 yes, 3.x no: the next realtime input does, and is
        answered in the light of the history's last user words)."""
        for turn in reversed(content.turns or []):
            words = " ".join(part.text for part in turn.parts if part.text).strip()
            if words:  # the last words said: the user's ask, or the model's (nothing to answer)
                self.seeded = words if (turn.role or "user") == "user" else None
                break
        if not content.turn_complete:
            return
        self.seeding = False
        if self.profile.history_seed_starts_turn:
            seeded, self.seeded = self.seeded, None
            self.queue_turn(UserTurn("text", seeded or " ".join(texts)))
            await self._changed()

    def _with_seed(self, text: str) -> str:
        """A turn's text, after a seeded history: a blank trigger (``" "``) asks what the
        history's last user words asked."""
        seeded, self.seeded = self.seeded, None
        return seeded if seeded is not None and not text.strip() else text

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
            self.queue_turn(UserTurn("text", self._with_seed(realtime.text)))
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
            # 3.x models refuse the deprecated form with 1007
            # (kizuna-ai-lab/sokuji#150, close code per aicc2025/sip-to-ai#5); 2.x still take it.
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
            pcm = b64decode(blob.data)
        except WireError as error:
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
            self.queue_turn(UserTurn("audio", None, spoken))
