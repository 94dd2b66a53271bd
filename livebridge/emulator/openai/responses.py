"""The model's side of an OpenAI Realtime connection: one response at a time, and what goes in it.

The model speaks only inside a response. A client's ``response.create`` (or the server's own
turn detection, or ``auto_response``) opens one; the scenario's ``say``/``speak``/``tool_call``
fill it; ``turn_complete`` ends it ``completed``, ``cancel``/``interrupted`` end it ``cancelled``.
A response carrying calls stays open until the scenario waits for their outputs (it then ends
``completed``, as the service ends a response after its function calls) or cancels them, so a
scenario can cancel calls the client has already seen (the
SDK's ``response.done`` statuses). A response no
scenario step waits for (a continuation opened before every output was in, a
``response.create`` with nothing new, an out-of-band one) the service answers at once with what
it has, as the real one does. Every event is recorded in the transcript as it was sent.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
from websockets.asyncio.server import ServerConnection

from livebridge.emulator.base import FRAME_SECONDS, Connection, frame_count, pace
from livebridge.emulator.openai import codec
from livebridge.emulator.openai.checker import RealtimeChecker, ResponseKind
from livebridge.emulator.shared import Shared, UserTurn
from livebridge.emulator.speech import spoken
from livebridge.emulator.voice import tone
from livebridge.errors import ScenarioError
from livebridge.vendors.gemini import wire

#: Conversation items remembered for ``retrieve``/``truncate``/``delete``; past this the oldest
#: is forgotten (asking for it then gets ``item_not_found``).
MAX_ITEMS = 1024

Origin = Literal["client", "server"]


@dataclass(slots=True)
class _Message:
    """The assistant message item the model is speaking into."""

    item: dict[str, Any]
    output_index: int
    modality: Literal["audio", "text"]
    text: list[str] = field(default_factory=list)
    audio_bytes: int = 0


@dataclass(slots=True)
class _Response:
    id: str
    origin: Origin
    output: list[dict[str, Any]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    message: _Message | None = None
    tokens: int = 0
    metadata: dict[str, Any] | None = None  # the create's, echoed (clients match on it)
    ending: bool = False  # its response.done is on its way: nothing more goes in


class ModelOutput(Connection):
    """Responses and the model's output in them; ``RealtimeSession`` adds the client's events."""

    checker: RealtimeChecker

    def __init__(
        self, shared: Shared, ws: ServerConnection, session_id: str, *, model: str
    ) -> None:
        super().__init__(shared, ws, session_id)
        self.model = model
        self.checker = RealtimeChecker(
            session_id, shared.report, thresholds=shared.options.thresholds
        )
        self.session: dict[str, Any] = codec.default_session(model, f"sess_{session_id}")
        self.config = msgspec.convert(self.session, codec.SessionConfig)
        self.declarations: dict[str, wire.FunctionDeclaration] = {}
        self.active: _Response | None = None
        self._items: dict[str, dict[str, Any]] = {}
        self._last_item: str | None = None
        self._fresh: list[str] = []  # user text since the last response
        self._fresh_audio = 0.0  # seconds of user speech since the last response
        self._audio_ms = 0.0  # all audio appended so far
        self._speech_item: str | None = None
        self._input_tokens = 0

    # public state ------------------------------------------------------------------------------

    @property
    def modality(self) -> str:
        """``AUDIO`` or ``TEXT``, as the Gemini side names them."""
        return "AUDIO" if "audio" in (self.config.output_modalities or ["audio"]) else "TEXT"

    # sending -----------------------------------------------------------------------------------

    async def send(self, message: dict[str, Any]) -> None:
        """Send one server event (a text frame), through the configured faults."""
        payload = {"event_id": codec.new_id("event"), **message}
        frame = codec.frame_of(payload)
        item = payload.get("item")
        tool_call = (  # a scenario's raw events may lack any of these
            payload.get("type") == "response.output_item.done"
            and isinstance(item, dict)
            and item.get("type") == "function_call"
        )
        await self.send_frame(payload, frame, recorded=codec.sent_copy(frame), tool_call=tool_call)

    async def send_error(self, error: codec.EventError, client_event_id: str | None) -> None:
        await self.send(codec.error_event(error, client_event_id))

    def _remember(self, item: dict[str, Any]) -> None:
        self._items[item["id"]] = item
        while len(self._items) > MAX_ITEMS:
            del self._items[next(iter(self._items))]

    async def _add_item(self, item: dict[str, Any]) -> dict[str, Any]:
        item = {"object": "realtime.item", "status": "completed", **item}
        item.setdefault("id", codec.new_id("item"))
        previous, self._last_item = self._last_item, item["id"]
        self._remember(item)
        for kind in ("conversation.item.added", "conversation.item.done"):
            await self.send(codec.event(kind, previous_item_id=previous, item=item))
        return item

    # responses ---------------------------------------------------------------------------------

    async def _open_response(
        self, origin: Origin, kind: ResponseKind, metadata: dict[str, Any] | None = None
    ) -> None:
        """Start a response for what ``kind`` says (the checker's reading of it): a new user
        turn goes to the scenario, a continuation is the scenario's to fill, and one that has
        nothing for the scenario (an early continuation, a create with nothing new) the
        service answers at once with what it has. ``metadata`` (the client's
        ``response.metadata``) comes back on the response, as the service returns it."""
        response = _Response(codec.new_id("resp"), origin, metadata=metadata)
        self.active = response
        await self.send(
            codec.event("response.created", response=self._response_object(response, "in_progress"))
        )
        if kind == "turn":
            if self._fresh_audio and not self._fresh:
                turn = UserTurn("audio", None, self._fresh_audio)
            else:
                turn = UserTurn("text", " ".join(self._fresh))
            self.queue_turn(turn)
        self._fresh, self._fresh_audio = [], 0.0
        await self._changed()
        if kind == "early":
            await self._answer_at_once(self._results_so_far())
        elif kind == "nothing":
            await self._answer_at_once(None)

    async def _answer_at_once(self, text: str | None) -> None:
        """The active response, said and done now (no scenario step waits for it)."""
        if text:
            await self.say("service", text)
        await self.end_response("completed")

    def _results_so_far(self) -> str:
        """What the model can say about the latest calls before every output is in."""
        records = self.checker.latest_calls()
        said = [
            f"{record.name}: {spoken(record.answer.response)}"
            for record in records
            if record.answer is not None
        ]
        waiting = sum(record.open for record in records)
        return "; ".join([*said, f"still waiting for {waiting} more"]) + "."

    async def _out_of_band(self, create: codec.ResponseCreate) -> None:
        """An out-of-band response (``conversation: "none"``): it may run beside the response in
        progress and adds nothing to the conversation; the service answers it at once."""
        params = create.response or {}
        metadata = params.get("metadata") if isinstance(params.get("metadata"), dict) else None
        modalities = list(params.get("output_modalities") or self.config.output_modalities or [])
        response_id = codec.new_id("resp")

        def body(status: str, usage: dict[str, Any] | None) -> dict[str, Any]:
            return codec.response_object(
                response_id,
                status,
                [],
                modalities or ["audio"],
                usage=usage,
                conversation_id=None,
                metadata=metadata,
            )

        await self.send(codec.event("response.created", response=body("in_progress", None)))
        usage = {"total_tokens": 1, "input_tokens": 1, "output_tokens": 0}
        await self.send(codec.event("response.done", response=body("completed", usage)))

    def _response_object(
        self, response: _Response, status: str, reason: str | None = None
    ) -> dict[str, Any]:
        usage = None
        if status != "in_progress":
            output_tokens = max(response.tokens, 1)
            input_tokens = max(self._input_tokens, 1)
            usage = {
                "total_tokens": input_tokens + output_tokens,
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
            }
        modalities = self.config.output_modalities or ["audio"]
        return codec.response_object(
            response.id,
            status,
            response.output,
            list(modalities),
            reason=reason,
            usage=usage,
            metadata=response.metadata,
        )

    async def end_response(
        self,
        status: Literal["completed", "cancelled", "incomplete"],
        *,
        reason: str | None = None,
        without_id: bool = False,
    ) -> None:
        """End the active response with ``status`` (``response.done``); it stays the active
        one until then (a ``response.create`` meanwhile is refused), and ending it twice, from
        the scenario and from a barge-in at once, sends one ``response.done``. ``without_id``:
        its ``response.done`` carries no response id (bad server input, to test a client)."""
        response = self.active
        if response is None or response.ending:
            return
        response.ending = True
        await self._close_message(response, "completed" if status == "completed" else "incomplete")
        self.active = None
        self.checker.end_response(response.id, status)
        done = self._response_object(response, status, reason)
        if without_id:
            del done["id"]
        await self.send(codec.event("response.done", response=done))
        if response.calls and status == "completed":  # the pong proves the client read it
            await self.after_pong(lambda: self.checker.read(response.id))
        await self._changed()

    async def after_pong(self, then: Callable[[], None]) -> None:
        """Ping the client and run ``then`` once its pong is back: the client has read
        everything sent before the ping."""
        await self.ping_then(lambda ack: self._ponged(ack, then))

    def _ponged(self, ack: asyncio.Future[float], then: Callable[[], None]) -> None:
        if not ack.cancelled() and ack.exception() is None:
            then()
            self.shared.notify()

    async def _response(self) -> _Response:
        """The active response; the model waits for one (it speaks only when asked)."""
        await self.wait_until(lambda: self.active is not None and not self.active.ending)
        assert self.active is not None
        return self.active

    async def _output_item(self, response: _Response, item: dict[str, Any]) -> int:
        index = len(response.output)
        item = {"object": "realtime.item", **item}
        response.output.append(item)
        self._remember(item)
        await self.send(
            codec.event(
                "response.output_item.added", response_id=response.id, output_index=index, item=item
            )
        )
        previous, self._last_item = self._last_item, item["id"]
        await self.send(
            codec.event("conversation.item.added", previous_item_id=previous, item=item)
        )
        return index

    async def _finish_item(self, response: _Response, index: int, status: str) -> None:
        item = response.output[index]
        item["status"] = status
        where = {"response_id": response.id, "output_index": index}
        await self.send(codec.event("response.output_item.done", **where, item=item))
        await self.send(codec.event("conversation.item.done", previous_item_id=None, item=item))

    async def _message(self, response: _Response) -> _Message:
        if response.message is not None:
            return response.message
        modality: Literal["audio", "text"] = "audio" if self.modality == "AUDIO" else "text"
        item = {
            "id": codec.new_id("item"),
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        index = await self._output_item(response, item)
        message = _Message(item, index, modality)
        response.message = message
        part = (
            {"type": modality, "transcript": ""}
            if modality == "audio"
            else {"type": "text", "text": ""}
        )
        await self.send(
            codec.event("response.content_part.added", **self._where(response, message), part=part)
        )
        return message

    @staticmethod
    def _where(response: _Response, message: _Message) -> dict[str, Any]:
        return {
            "response_id": response.id,
            "item_id": message.item["id"],
            "output_index": message.output_index,
            "content_index": 0,
        }

    async def _close_message(self, response: _Response, status: str) -> None:
        message = response.message
        if message is None:
            return
        response.message = None
        where = self._where(response, message)
        text = "".join(message.text)
        if message.modality == "audio":
            if message.audio_bytes:
                await self.send(codec.event("response.output_audio.done", **where))
            await self.send(
                codec.event("response.output_audio_transcript.done", **where, transcript=text)
            )
            part = {"type": "audio", "transcript": text}
            message.item["content"] = [{"type": "output_audio", "transcript": text}]
        else:
            await self.send(codec.event("response.output_text.done", **where, text=text))
            part = {"type": "text", "text": text}
            message.item["content"] = [{"type": "output_text", "text": text}]
        await self.send(codec.event("response.content_part.done", **where, part=part))
        await self._finish_item(response, message.output_index, status)

    # the model's side (the scenario API) -------------------------------------------------------

    async def say(self, owner: str, text: str) -> None:
        """Model text: the transcript of its audio in an audio session, output text otherwise."""
        response = await self._response()
        message = await self._message(response)
        message.text.append(text)
        response.tokens += max(1, len(text) // 4)
        kind = (
            "response.output_audio_transcript.delta"
            if message.modality == "audio"
            else "response.output_text.delta"
        )
        await self.send(codec.event(kind, **self._where(response, message), delta=text))

    def _voice_frame(self, rate: int) -> bytes:
        """40 ms of the tone, as the session's output format says: PCM16, or G.711 μ-law at
        8 kHz for ``audio/pcmu`` (when the phone extra's codec is installed)."""
        output = self.config.audio.output if self.config.audio else None
        if output is not None and output.format is not None and output.format.type == "audio/pcmu":
            try:
                from livebridge.phone.audio import pcm16_to_ulaw
            except ImportError:
                pass
            else:
                return pcm16_to_ulaw(tone(FRAME_SECONDS, 8000))
        return tone(FRAME_SECONDS, rate)

    async def speak(self, owner: str, seconds: float, rate: int = codec.AUDIO_RATE) -> None:
        """Model audio (PCM16, 24 kHz, or μ-law for ``audio/pcmu``) in 40 ms frames at
        real-time pace; stops when the response ends (a barge-in, a cancel)."""
        response = await self._response()
        if self.modality != "AUDIO":
            return
        message = await self._message(response)
        frame = base64.b64encode(self._voice_frame(rate)).decode()
        start = asyncio.get_running_loop().time()
        for index in range(frame_count(seconds)):
            if self.active is not response or response.ending:
                return
            await self.send(
                codec.event(
                    "response.output_audio.delta", **self._where(response, message), delta=frame
                )
            )
            message.audio_bytes += len(frame)
            response.tokens += 1
            await pace(start, index)

    async def issue_calls(
        self,
        owner: str,
        calls: Sequence[tuple[str, dict[str, Any] | str]],
        ids: list[str | None] | None = None,
        *,
        reissue_of: str | None = None,
    ) -> list[str]:
        """Add one ``function_call`` item per call to the active response, arguments streamed
        as deltas then done; a ``str`` argument is sent verbatim (even if not JSON)."""
        if reissue_of is not None:
            raise ScenarioError("re-issuing calls is Gemini behaviour; OpenAI Realtime has none")
        response = await self._response()
        await self._close_message(response, "completed")
        chosen = ids or [None] * len(calls)
        specs = [
            (call_id or codec.new_id("call"), name, args)
            for call_id, (name, args) in zip(chosen, calls, strict=True)
        ]
        self.checker.issue(
            response.id, [(i, n, a if isinstance(a, dict) else {}) for i, n, a in specs]
        )
        response.calls.extend(spec[0] for spec in specs)
        for call_id, name, args in specs:
            arguments = args if isinstance(args, str) else msgspec.json.encode(args).decode()
            item = {
                "id": codec.new_id("item"),
                "type": "function_call",
                "status": "in_progress",
                "name": name,
                "call_id": call_id,
                "arguments": "",
            }
            index = await self._output_item(response, item)
            where = {
                "response_id": response.id,
                "item_id": item["id"],
                "output_index": index,
                "call_id": call_id,
            }
            half = len(arguments) // 2
            for delta in filter(None, (arguments[:half], arguments[half:])):
                await self.send(
                    codec.event("response.function_call_arguments.delta", **where, delta=delta)
                )
            await self.send(
                codec.event(
                    "response.function_call_arguments.done", **where, name=name, arguments=arguments
                )
            )
            response.output[index]["arguments"] = arguments
            response.tokens += max(1, len(arguments) // 4)
            await self._finish_item(response, index, "completed")
        await self._changed()
        return [spec[0] for spec in specs]

    async def end_calls(self, ids: list[str]) -> None:
        """The model is done issuing: the active response carrying any of ``ids`` ends
        ``completed``, so the client may answer them."""
        if self.active is not None and set(ids) & set(self.active.calls):
            await self.end_response("completed")

    async def cancel_calls(self, ids: list[str]) -> None:
        """End the response carrying ``ids`` ``cancelled`` (its calls must not be answered);
        a call whose response already ended cannot be cancelled on this vendor."""
        active = self.active
        if active is not None and set(ids) & set(active.calls):
            await self.end_response("cancelled", reason="turn_detected")
            return
        unknown = [call_id for call_id in ids if call_id not in self.checker.calls]
        if unknown:
            raise ScenarioError(f"cancel: unknown call ids {', '.join(unknown)}")
        if any(self.checker.calls[call_id].open for call_id in ids):
            raise ScenarioError(
                "cancel: the response of these calls already ended completed; on OpenAI Realtime "
                "only a response in progress can be cancelled (cancel before wait_answers)"
            )

    async def complete_turn(
        self,
        owner: str,
        usage: dict[str, Any] | None = None,
        *,
        interrupted: bool = False,
        wait: bool = True,
    ) -> None:
        """End the active response ``completed`` (``incomplete`` with ``interrupted``)."""
        await self.end_response("incomplete" if interrupted else "completed")

    async def interrupt(self, calls: str = "cancel", *, complete: bool = True) -> None:
        """The user talks over the model: ``input_audio_buffer.speech_started``, then the active
        response ends ``cancelled`` (reason ``turn_detected``), its calls with it."""
        if self.active is None:
            return
        self._speech_item = codec.new_id("item")
        await self.send(
            codec.event(
                "input_audio_buffer.speech_started",
                audio_start_ms=int(self._audio_ms),
                item_id=self._speech_item,
            )
        )
        await self.end_response("cancelled", reason="turn_detected")
