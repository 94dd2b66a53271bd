"""One emulated OpenAI Realtime connection: the client's events in, the service's answers out.

Events the service refuses get an ``error`` event (the session goes on); audio goes through the
server's turn detection (``input_audio_buffer.speech_started``/``speech_stopped``/``committed``,
a barge-in cancels the active response); ``function_call_output`` items and ``response.create``
are judged by the contract checker. The model's side lives in ``ModelOutput``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
from websockets.asyncio.server import ServerConnection

from livebridge.emulator.openai import codec
from livebridge.emulator.openai.responses import ModelOutput
from livebridge.emulator.shared import Shared
from livebridge.emulator.voice import VoiceActivity
from livebridge.vendors.gemini import wire

#: The shortest audio ``input_audio_buffer.commit`` accepts, as the service does.
MIN_COMMIT_SECONDS = 0.1


class RealtimeSession(ModelOutput):
    """The server side of one accepted OpenAI Realtime connection."""

    def __init__(
        self, shared: Shared, ws: ServerConnection, session_id: str, *, path: str, model: str
    ) -> None:
        super().__init__(shared, ws, session_id, model=model)
        self.path = path
        self.voice = VoiceActivity()
        self._buffered = 0.0  # seconds in the input audio buffer
        self._user_audio: str | None = None  # the last committed user audio item
        self._speech_before_output: float | None = None  # respond_before_next_output
        self._on_voice_config()

    async def refuse(self, error: codec.EventError, code: int = 4000) -> None:
        """Refuse the connection as the service does: an ``error`` event, then a close whose
        reason is ``<type>.<code>``."""
        self.checker.flag("invalid_event", error.message, None)
        await self.send_error(error, None)
        await self.close(code, f"{error.type}.{error.code}")

    async def start(self) -> None:
        await self.send(codec.event("session.created", session=self.session))

    # client events -----------------------------------------------------------------------------

    async def handle_frame(self, frame: str | bytes) -> None:
        record, result = codec.read_event(frame)
        self.shared.record("client", self.id, record)
        if self.lost(record):
            return
        if isinstance(result, codec.EventError):
            await self._refused(record, result)
            return
        await self.on_event(record, result)
        await self._changed()

    async def _refused(self, raw: dict[str, Any], error: codec.EventError) -> None:
        self.checker.flag("invalid_event", error.message, raw)
        event_id = raw.get("event_id")
        await self.send_error(error, event_id if isinstance(event_id, str) else None)

    async def on_event(self, raw: dict[str, Any], message: codec.ClientEvent) -> None:
        match message:
            case codec.SessionUpdate():
                await self._on_session_update(raw, message)
            case codec.InputAudioBufferAppend():
                await self._on_audio(raw, message.audio)
            case codec.InputAudioBufferCommit():
                await self._on_commit(raw)
            case codec.InputAudioBufferClear():
                self._buffered = 0.0
                self.voice.end(force=False)
                await self.send(codec.event("input_audio_buffer.cleared"))
            case codec.ConversationItemCreate():
                await self._on_item(raw, message)
            case codec.ResponseCreate():
                await self._on_response_create(raw, message)
            case codec.ResponseCancel():
                await self._on_response_cancel(raw, message)
            case codec.ConversationItemTruncate():
                await self._on_truncate(raw, message)
            case codec.ConversationItemDelete():
                if self._items.pop(message.item_id, None) is None:
                    await self._refused(raw, _no_item(message.item_id))
                else:
                    await self.send(
                        codec.event("conversation.item.deleted", item_id=message.item_id)
                    )
            case codec.ConversationItemRetrieve():
                item = self._items.get(message.item_id)
                if item is None:
                    await self._refused(raw, _no_item(message.item_id))
                else:
                    await self.send(codec.event("conversation.item.retrieved", item=item))
            case codec.OutputAudioBufferClear():
                text = "output_audio_buffer.clear is only supported for WebRTC and SIP sessions."
                await self._refused(raw, codec.EventError("invalid_value", text, "type"))

    async def _on_session_update(self, raw: dict[str, Any], update: codec.SessionUpdate) -> None:
        merged = codec.merge_session(self.session, update.session)
        if isinstance(merged, codec.EventError):
            await self._refused(raw, merged)
            return
        self.session, self.config = merged
        self.declarations = {
            tool.name: wire.FunctionDeclaration(
                name=tool.name, description=tool.description, parameters_json_schema=tool.parameters
            )
            for tool in self.config.tools or []
            if tool.type == "function" and tool.name
        }
        self._on_voice_config()
        await self.send(codec.event("session.updated", session=self.session))

    def _on_voice_config(self) -> None:
        audio_input = self.config.audio.input if self.config.audio else None
        detection = audio_input.turn_detection if audio_input else None
        silence = (detection.silence_duration_ms or 500) / 1000 if detection else 0.5
        self.voice = VoiceActivity(silence, automatic=detection is not None)

    @property
    def _detection(self) -> codec.TurnDetection | None:
        audio_input = self.config.audio.input if self.config.audio else None
        return audio_input.turn_detection if audio_input else None

    async def _on_audio(self, raw: dict[str, Any], data: str) -> None:
        pcm = codec.decode_audio(data)
        if isinstance(pcm, codec.EventError):
            await self._refused(raw, pcm)
            return
        audio_input = self.config.audio.input if self.config.audio else None
        audio_format = audio_input.format if audio_input else None
        if audio_format is not None and audio_format.type in ("audio/pcmu", "audio/pcma"):
            # G.711: 8 kHz, a byte a sample. μ-law is heard (its speech detected) when the
            # phone extra's codec is installed; otherwise, and for A-law, commit by hand.
            g711 = _ulaw_decoder() if audio_format.type == "audio/pcmu" else None
            if g711 is None:
                seconds = len(pcm) / 8000
                self._buffered += seconds
                self._audio_ms += seconds * 1000
                return
            pcm = g711(pcm)
        seconds = (
            len(pcm)
            / 2
            / (
                8000
                if audio_format is not None and audio_format.type == "audio/pcmu"
                else codec.AUDIO_RATE
            )
        )
        self._buffered += seconds
        chunk_start_ms = self._audio_ms
        self._audio_ms += seconds * 1000
        self._input_tokens += max(1, round(seconds * 10))
        was_silent = self.voice.speech == 0.0
        heard = self.voice.hear(pcm, seconds, model_talking=False)
        if self._detection is None:
            return
        if was_silent and self.voice.speech > 0.0:
            await self._speech_started(chunk_start_ms)
        elif heard == "end_of_turn":
            await self._end_of_speech()

    async def _speech_started(self, start_ms: float) -> None:
        """Server VAD heard speech: say so, and cut the active response if it may."""
        self._speech_item = codec.new_id("item")
        started = codec.event(
            "input_audio_buffer.speech_started",
            audio_start_ms=int(start_ms),
            item_id=self._speech_item,
        )
        await self.send(started)
        detection = self._detection
        if self.active is not None and (detection is None or detection.interrupt_response):
            await self.end_response("cancelled", reason="turn_detected")

    async def _end_of_speech(self) -> None:
        item_id = self._speech_item or codec.new_id("item")
        stopped = codec.event(
            "input_audio_buffer.speech_stopped", audio_end_ms=int(self._audio_ms), item_id=item_id
        )
        await self.send(stopped)
        await self._commit(item_id)
        detection = self._detection
        if detection is not None and detection.create_response and self.active is None:
            await self._open_response("server", self.checker.server_started(fresh_input=True))

    async def _on_commit(self, raw: dict[str, Any]) -> None:
        if self._buffered < MIN_COMMIT_SECONDS:
            text = (
                "Error committing input audio buffer: buffer too small. Expected at least 100ms "
                f"of audio, but buffer only has {self._buffered * 1000:.2f}ms of audio."
            )
            await self._refused(raw, codec.EventError("input_audio_buffer_commit_empty", text))
            return
        await self._commit(codec.new_id("item"))

    async def _commit(self, item_id: str) -> None:
        spoken = self.voice.end(force=True) or self._buffered
        self._fresh_audio += spoken
        self._buffered = 0.0
        self._speech_item = None
        self._user_audio = item_id
        previous = self._last_item
        await self.send(
            codec.event("input_audio_buffer.committed", item_id=item_id, previous_item_id=previous)
        )
        content = [{"type": "input_audio", "transcript": None}]
        item = {"id": item_id, "type": "message", "role": "user", "content": content}
        await self._add_item(item)

    async def _on_item(self, raw: dict[str, Any], create: codec.ConversationItemCreate) -> None:
        item = create.item
        fields = msgspec.to_builtins(item)
        if item.type == "function_call_output":
            if not item.call_id:
                error = codec.EventError(
                    "missing_required_parameter",
                    "Missing required parameter: 'item.call_id'.",
                    "item.call_id",
                )
                await self._refused(raw, error)
                return
            if not isinstance(item.output, str):
                text = "Invalid type for 'item.output': expected a string."
                await self._refused(raw, codec.EventError("invalid_type", text, "item.output"))
                return
            if self._speech_before_output is not None:
                await self._user_spoke(self._speech_before_output)
            record = self.checker.on_output(raw, item.call_id, item.output)
            if record is None:
                text = f"No function call with call_id '{item.call_id}' found in the conversation."
                await self.send_error(
                    codec.EventError("invalid_value", text, "item.call_id"), create.event_id
                )
                return
            await self._add_item(fields)
            await self._changed()
            completed = self.checker.complete_batch(item.call_id)
            if completed is not None:  # its response.create is due once the client reads this
                await self.after_pong(lambda: self.checker.outputs_read(completed))
            auto = self.shared.options.auto_response and self.active is None
            if auto and self.checker.due_for_auto_start():
                await self._open_response("server", self.checker.server_started())
            return
        if item.type == "message" and item.role in ("user", "system", "assistant"):
            texts = [part.text for part in item.content or [] if part.text]
            if item.role == "user":
                self._fresh += texts
                self._input_tokens += sum(len(text) // 4 + 1 for text in texts)
            await self._add_item(fields)
            return
        if item.type == "function_call":
            await self._add_item(fields)
            return
        text = (
            f"Invalid value: '{item.type}'. Supported item types are 'message', "
            "'function_call' and 'function_call_output'."
        )
        await self._refused(raw, codec.EventError("invalid_value", text, "item.type"))

    async def _on_response_create(self, raw: dict[str, Any], create: codec.ResponseCreate) -> None:
        fresh = bool(self._fresh or self._fresh_audio)
        active = None if create.out_of_band or self.active is None else self.active
        kind = self.checker.on_response_create(
            raw,
            fresh_input=fresh,
            active=active.origin if active is not None else None,
            out_of_band=create.out_of_band,
        )
        if kind == "out_of_band":
            await self._out_of_band(create)
        elif active is not None:
            text = (
                f"Conversation already has an active response in progress: {active.id}. "
                "Wait until the response is finished before creating a new one."
            )
            error = codec.EventError("conversation_already_has_active_response", text)
            event_id = raw.get("event_id")
            await self.send_error(error, event_id if isinstance(event_id, str) else None)
        else:
            metadata = (create.response or {}).get("metadata")
            await self._open_response(
                "client", kind, metadata if isinstance(metadata, dict) else None
            )

    def respond_before_next_output(self, seconds: float = 1.0) -> None:
        """The user speaks for ``seconds`` and turn detection ends the utterance just before
        the next ``function_call_output`` arrives: the server starts a response by itself
        (a new turn, for the scenario) that began before that output was in (the race a
        voice agent meets while its tools run)."""
        self._speech_before_output = seconds

    async def _user_spoke(self, seconds: float) -> None:
        self._speech_before_output = None
        self._buffered = seconds
        await self._commit(codec.new_id("item"))
        if self.active is None:
            await self._open_response("server", self.checker.server_started(fresh_input=True))

    async def _on_response_cancel(self, raw: dict[str, Any], cancel: codec.ResponseCancel) -> None:
        active = self.active
        if active is None or (cancel.response_id and cancel.response_id != active.id):
            error = codec.EventError(
                "response_cancel_not_active", "Cancellation failed: no active response found."
            )
            await self.send_error(error, cancel.event_id)
            return
        await self.end_response("cancelled", reason="client_cancelled")

    async def _on_truncate(
        self, raw: dict[str, Any], truncate: codec.ConversationItemTruncate
    ) -> None:
        item = self._items.get(truncate.item_id)
        if item is None or item.get("role") != "assistant":
            await self._refused(raw, _no_item(truncate.item_id))
            return
        truncated = codec.event(
            "conversation.item.truncated",
            item_id=truncate.item_id,
            content_index=truncate.content_index,
            audio_end_ms=truncate.audio_end_ms,
        )
        await self.send(truncated)

    async def transcribe(self, text: str) -> None:
        """The service's transcript of the last user audio, when the session asked for one."""
        audio_input = self.config.audio.input if self.config.audio else None
        if audio_input is None or audio_input.transcription is None or self._user_audio is None:
            return
        await self.send(
            codec.event(
                "conversation.item.input_audio_transcription.completed",
                item_id=self._user_audio,
                content_index=0,
                transcript=text,
                usage={"type": "duration", "seconds": 1},
            )
        )


def _no_item(item_id: str) -> codec.EventError:
    text = f"Item with item_id '{item_id}' not found in the conversation."
    return codec.EventError("item_not_found", text, "item_id")


def _ulaw_decoder() -> Callable[[bytes], bytes] | None:
    """The phone extra's G.711 μ-law decoder, if installed."""
    try:
        from livebridge.phone.audio import ulaw_to_pcm16
    except ImportError:
        return None
    return ulaw_to_pcm16
