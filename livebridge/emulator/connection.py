"""One emulated Live connection: reads client frames, sends server frames, keeps the turn state.

The model's side of the conversation holds "the floor" while a turn is open; a pending BLOCKING call
keeps it open (no ``turnComplete``), barge-in takes it away. Scenarios drive it through
``Conversation``; the behaviour the real service has on its own (re-issuing unanswered calls,
reporting NON_BLOCKING results by their ``scheduling``, resumption updates) lives here.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from livebridge import wire
from livebridge.emulator.checker import Answer, CallRecord, Checker, Violation
from livebridge.emulator.faults import Faults
from livebridge.emulator.speech import spoken

Direction = Literal["client", "server"]
Scenario = Callable[["Any"], Awaitable[None]]

MAX_REASON_BYTES = 123
DEADLINE_EXPIRED = "Deadline expired before operation could complete."
FRAME_SECONDS = 0.04
_SPEECH_PEAK = 500
_DEFAULT_SILENCE_SECONDS = 0.5


@dataclass(frozen=True, slots=True)
class TranscriptEntry:
    """One message that crossed the wire (or a close), with its monotonic timestamp."""

    at: float
    direction: Direction
    session: str
    message: dict[str, Any]


@dataclass(frozen=True, slots=True)
class UserTurn:
    """A finished user utterance: typed text or audio."""

    kind: Literal["text", "audio"]
    text: str | None = None
    audio_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class Report:
    """A NON_BLOCKING answer the model acted on, and how (its scheduling)."""

    call_id: str
    scheduling: str
    at: float


@dataclass(slots=True)
class Shared:
    """State shared by every connection of one emulator (lives on the server thread)."""

    faults: Faults
    reissue_after: float | None
    check_audio_during_blocking: bool
    notify: Callable[[], None]
    transcript: list[TranscriptEntry] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    handles: dict[str, dict[str, CallRecord]] = field(default_factory=dict)

    def record(self, direction: Direction, session: str, message: dict[str, Any]) -> None:
        self.transcript.append(TranscriptEntry(time.monotonic(), direction, session, message))
        self.notify()


def cap_reason(reason: str) -> str:
    """Cut a close reason to 123 UTF-8 bytes without splitting a character."""
    return reason.encode()[:MAX_REASON_BYTES].decode("utf-8", "ignore")


def parse_duration(text: str) -> float:
    """A proto Duration string (``"50s"``, ``"0.5s"``) in seconds."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)s\s*", text)
    if not match:
        raise ValueError(f"not a duration: {text!r}")
    return float(match.group(1))


def tone(seconds: float, rate: int) -> bytes:
    """A quiet 220 Hz PCM16 tone: something audible to stand in for speech."""
    count = int(seconds * rate)
    return struct.pack(
        f"<{count}h", *(int(3000 * math.sin(2 * math.pi * 220 * i / rate)) for i in range(count))
    )


def _is_speech(pcm: bytes) -> bool:
    samples = memoryview(pcm[: len(pcm) - len(pcm) % 2]).cast("h")
    return len(samples) > 0 and max(max(samples), -min(samples)) > _SPEECH_PEAK


def _rate(mime_type: str | None) -> int:
    match = re.search(r"rate=(\d+)", mime_type or "")
    return int(match.group(1)) if match else 16000


def _new_call_id() -> str:
    return f"function-call-{random.getrandbits(64)}"


class EmulatedSession:
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
    ) -> None:
        self.shared = shared
        self.ws = ws
        self.id = session_id
        self.path = path
        self.api_version = api_version
        self.auth = auth
        self.setup = wire.Setup()
        self.resumed_from: str | None = None
        self.checker = Checker(
            session_id,
            shared.violations,
            check_audio_during_blocking=shared.check_audio_during_blocking,
        )
        self.declarations: dict[str, wire.FunctionDeclaration] = {}
        self.turns: asyncio.Queue[UserTurn] = asyncio.Queue()
        self.reports: list[Report] = []
        self.errors: list[str] = []
        self.close_info: dict[str, Any] | None = None
        self.generation = 0
        self.floor_owner: str | None = None
        self.server_closed = False
        self._cond = asyncio.Condition()
        self._send_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._turn_calls: list[str] = []
        self._response_tokens = 0
        self._prompt_tokens = 0
        self._aborted = False
        self._speech = 0.0
        self._silence = 0.0
        self._activity = False

    # state views -------------------------------------------------------------------------------

    @property
    def pending_calls(self) -> list[CallRecord]:
        """Calls issued and not yet answered, cancelled or superseded."""
        return self.checker.pending()

    @property
    def answered(self) -> dict[str, Answer]:
        """Answers received so far, by call id."""
        return {
            record.id: record.answer
            for record in self.checker.calls.values()
            if record.answer is not None
        }

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
        self, setup: wire.Setup, known: dict[str, CallRecord] | None, handle: str | None
    ) -> None:
        """Adopt the client's setup (and, when resuming, the calls its handle knew)."""
        self.setup = setup
        self.resumed_from = handle
        self._declare(setup.tools or [])
        if known is not None:
            self.checker = Checker(
                self.id,
                self.shared.violations,
                check_audio_during_blocking=self.shared.check_audio_during_blocking,
                known=known,
            )

    def _declare(self, tools: list[wire.Tool]) -> None:
        self.declarations = {
            declaration.name: declaration
            for tool in tools
            for declaration in tool.function_declarations or []
        }

    def is_blocking(self, name: str) -> bool:
        declaration = self.declarations.get(name)
        return declaration is None or declaration.behavior != "NON_BLOCKING"

    def spawn(self, coro: Awaitable[None]) -> None:
        """Run background work owned by this connection (cancelled when it ends)."""
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def cancel_background(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _changed(self) -> None:
        async with self._cond:
            self._cond.notify_all()
        self.shared.notify()

    async def wait_until(
        self,
        predicate: Callable[[], bool],
        timeout: float | None = None,  # noqa: ASYNC109 (part of the scenario API)
    ) -> None:
        """Wait until ``predicate()`` holds; re-checked on every state change of this connection."""
        async with asyncio.timeout(timeout), self._cond:
            await self._cond.wait_for(predicate)

    # sending -----------------------------------------------------------------------------------

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

    async def send_raw(self, frame: bytes) -> None:
        """Send ``frame`` exactly as given: for testing how clients take malformed messages."""
        async with self._send_lock:
            self.shared.record("server", self.id, {"raw": frame.decode("utf-8", "replace")})
            await self.ws.send(frame)

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Close with a code and a reason (cut to 123 bytes)."""
        reason = cap_reason(reason)
        self.server_closed = True
        self.shared.record("server", self.id, {"close": {"code": code, "reason": reason}})
        await self.ws.close(code, reason)

    def abort(self) -> None:
        """Cut the connection without a close frame."""
        self._aborted = True
        self.server_closed = True
        self.shared.record("server", self.id, {"close": {"code": 1006, "reason": "aborted"}})
        self.ws.transport.abort()

    # the model's turn --------------------------------------------------------------------------

    async def open_turn(self, owner: str) -> None:
        """Take the floor for ``owner`` (waits while someone else holds it)."""
        async with self._cond:
            await self._cond.wait_for(lambda: self.floor_owner in (None, owner))
            if self.floor_owner is None:
                self.floor_owner = owner
                self._turn_calls = []
                self._response_tokens = 0

    async def complete_turn(
        self, owner: str, usage: wire.UsageMetadata | None = None, *, interrupted: bool = False
    ) -> None:
        """End ``owner``'s turn: ``turnComplete`` with usage; waits for pending BLOCKING calls."""
        if not interrupted:
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
                usage_metadata=usage or self._usage(),
            )
        )
        async with self._cond:
            self.floor_owner = None
            self._cond.notify_all()
        self.shared.notify()
        if self.setup.session_resumption is not None:
            await self.resumption_update(resumable=True)

    def _turn_blocked(self) -> bool:
        calls = self.checker.calls
        return any(calls[i].blocking and calls[i].open for i in self._turn_calls)

    def _usage(self) -> wire.UsageMetadata:
        prompt, response = max(self._prompt_tokens, 1), max(self._response_tokens, 1)
        modality = "AUDIO" if self.modality == "AUDIO" else "TEXT"
        return wire.UsageMetadata(
            prompt_token_count=prompt,
            response_token_count=response,
            total_token_count=prompt + response,
            response_tokens_details=[wire.ModalityTokenCount(modality, response)],
        )

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

    async def interrupt(self, *, cancel_calls: bool) -> None:
        """The model's output is cut: ``interrupted``, optionally ``toolCallCancellation``,
        then ``turnComplete``."""
        owner = self.floor_owner
        if owner is None:
            return
        self.generation += 1
        await self.send(wire.ServerMessage(server_content=wire.ServerContent(interrupted=True)))
        if cancel_calls:
            ids = [i for i in self._turn_calls if self.checker.calls[i].open]
            if ids:
                await self.cancel_calls(ids)
        await self.complete_turn(owner, interrupted=True)

    async def cancel_calls(self, ids: list[str]) -> None:
        self.checker.cancel(ids)
        await self.send(
            wire.ServerMessage(tool_call_cancellation=wire.ToolCallCancellation(ids=list(ids)))
        )
        await self._changed()

    async def issue_calls(
        self, owner: str, calls: list[tuple[str, dict[str, Any]]], reissue_of: str | None = None
    ) -> list[str]:
        """Send one ``toolCall`` carrying every call; returns their ids."""
        await self.open_turn(owner)
        specs = [(_new_call_id(), name, args, self.is_blocking(name)) for name, args in calls]
        self.checker.issue(specs, reissue_of=reissue_of)
        self._turn_calls.extend(spec[0] for spec in specs)
        function_calls = [wire.FunctionCall(id=i, name=n, args=a) for i, n, a, _ in specs]
        await self.send(wire.ServerMessage(tool_call=wire.ToolCall(function_calls=function_calls)))
        if self.setup.session_resumption is not None:
            await self.resumption_update(resumable=False)
        if self.shared.reissue_after is not None and reissue_of is None:
            for call_id, _, _, blocking in specs:
                if blocking:
                    self.spawn(self._reissue(owner, call_id, self.shared.reissue_after))
        await self._changed()
        return [spec[0] for spec in specs]

    async def _reissue(self, owner: str, root: str, delay: float) -> None:
        current = root
        while True:
            await asyncio.sleep(delay)
            record = self.checker.calls[current]
            if not record.open or self.floor_owner != owner:
                return
            (current,) = await self.issue_calls(
                owner, [(record.name, record.args)], reissue_of=root
            )

    def resolved_answer(self, call_id: str) -> Answer | None:
        """The answer that settled ``call_id`` (its own, or that of a re-issue of it)."""
        record = self.checker.calls[call_id]
        if record.state == "answered":
            return record.answer
        root = record.reissue_of or record.id
        for other in self.checker.calls.values():
            if other.state == "answered" and (other.id == root or other.reissue_of == root):
                return other.answer
        return None

    async def resumption_update(self, *, resumable: bool = True) -> str | None:
        """Send ``sessionResumptionUpdate``; never resumable while calls are pending."""
        if resumable and not self.checker.pending():
            handle = f"emu-{random.getrandbits(64):016x}"
            # No call is open, and settled records never change: a shallow copy is a snapshot.
            self.shared.handles[handle] = dict(self.checker.calls)
            update = wire.SessionResumptionUpdate(new_handle=handle, resumable=True)
        else:
            handle = None
            update = wire.SessionResumptionUpdate(new_handle="", resumable=False)
        await self.send(wire.ServerMessage(session_resumption_update=update))
        return handle

    async def go_away(self, time_left: str) -> None:
        """Send ``goAway``, then close 1011 when ``time_left`` runs out."""
        seconds = parse_duration(time_left)
        await self.send(wire.ServerMessage(go_away=wire.GoAway(time_left=time_left)))
        self.spawn(self._close_later(seconds, 1011, DEADLINE_EXPIRED))

    async def _close_later(self, seconds: float, code: int, reason: str) -> None:
        await asyncio.sleep(seconds)
        await self.close(code, reason)

    # receiving ---------------------------------------------------------------------------------

    async def read_loop(self) -> None:
        """Read and act on client frames until the connection closes."""
        read_delay = self.shared.faults.read_delay
        while True:
            if read_delay:
                await asyncio.sleep(read_delay)
            try:
                frame = await self.ws.recv()
            except ConnectionClosed as closed:
                if closed.rcvd is not None and not self.server_closed:
                    info = {"code": closed.rcvd.code, "reason": closed.rcvd.reason}
                    self.shared.record("client", self.id, {"close": info})
                return
            message = await self.decode(frame)
            if message is not None:
                await self.on_message(message)

    async def decode(self, frame: str | bytes) -> wire.ClientMessage | None:
        """Decode a frame; a malformed one closes the connection with 1007 like the service."""
        try:
            raw = wire.decode_client_json(frame)
        except wire.WireError as error:
            text = frame if isinstance(frame, str) else frame.decode("utf-8", "replace")
            offending = {"invalid": text[:1000]}
            self.shared.record("client", self.id, offending)
            await self._reject(error.reason, offending)
            return None
        self.shared.record("client", self.id, raw)
        drop = self.shared.faults.drop_client
        if drop is not None and drop(raw):
            return None
        try:
            message = wire.convert_client(raw)
        except wire.WireError as error:
            await self._reject(error.reason, raw)
            return None
        if len(raw) != 1:
            names = ", ".join(wire.snake(name) for name in raw)
            reason = (
                f"Invalid JSON payload received. Exactly one message field expected, got: {names}"
            )
            await self._reject(reason, raw)
            return None
        return message

    async def _reject(self, reason: str, offending: dict[str, Any]) -> None:
        self.checker.flag("malformed_message", reason, offending)
        await self.close(1007, reason)

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
        accepted = self.checker.on_tool_response(raw, response.function_responses)
        for record, answer in accepted:
            if record.blocking or not answer.response:
                continue
            scheduling = answer.scheduling or "WHEN_IDLE"
            if scheduling == "SILENT":
                self.reports.append(Report(record.id, scheduling, time.monotonic()))
            else:
                self.spawn(self._report(record, answer.response, scheduling))
        await self._changed()

    async def _report(self, record: CallRecord, response: dict[str, Any], scheduling: str) -> None:
        if scheduling == "INTERRUPT":
            await self.interrupt(cancel_calls=False)
        owner = f"report:{record.id}:{len(self.reports)}"
        await self.open_turn(owner)
        self.reports.append(Report(record.id, scheduling, time.monotonic()))
        await self.say(owner, f"{record.name} says {spoken(response)}")
        await self.complete_turn(owner)

    async def _on_client_content(self, content: wire.ClientContent) -> None:
        texts = [part.text for turn in content.turns or [] for part in turn.parts if part.text]
        self._prompt_tokens += sum(len(text) // 4 + 1 for text in texts)
        if content.turn_complete:
            await self.turns.put(UserTurn("text", " ".join(texts)))
            await self._changed()

    async def _on_realtime_input(self, raw: dict[str, Any], realtime: wire.RealtimeInput) -> None:
        if realtime.text is not None:
            self._prompt_tokens += len(realtime.text) // 4 + 1
            await self.turns.put(UserTurn("text", realtime.text))
        elif realtime.activity_start is not None:
            self._activity = True
            await self.interrupt(cancel_calls=True)
        elif realtime.activity_end is not None:
            self._activity = False
            await self._end_audio_turn(force=True)
        elif realtime.audio_stream_end:
            await self._end_audio_turn(force=False)
        elif realtime.audio is not None:
            await self._on_audio(raw, realtime.audio)
        elif realtime.media_chunks:
            self.checker.flag(
                "deprecated_media_chunks",
                "realtime_input.media_chunks is deprecated. Use audio, video, or text instead.",
                raw,
                "warning",
            )
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
        seconds = len(pcm) / 2 / _rate(blob.mime_type)
        self._prompt_tokens += max(1, round(seconds * 25))
        if _is_speech(pcm):
            if self._speech == 0.0 and self.turn_open:
                await self.interrupt(cancel_calls=True)
            self._speech += seconds
            self._silence = 0.0
        elif self._speech > 0.0 and not self._activity:
            self._silence += seconds
            if not self._vad_disabled and self._silence >= self._silence_seconds:
                await self._end_audio_turn(force=False)

    @property
    def _vad_disabled(self) -> bool:
        config = self.setup.realtime_input_config
        detection = config.automatic_activity_detection if config else None
        return bool(detection and detection.disabled)

    @property
    def _silence_seconds(self) -> float:
        config = self.setup.realtime_input_config
        detection = config.automatic_activity_detection if config else None
        if detection and detection.silence_duration_ms:
            return detection.silence_duration_ms / 1000
        return _DEFAULT_SILENCE_SECONDS

    async def _end_audio_turn(self, *, force: bool) -> None:
        if self._speech > 0.0 or force:
            await self.turns.put(UserTurn("audio", None, self._speech))
        self._speech = 0.0
        self._silence = 0.0
