"""One Twilio Media Streams WebSocket ↔ one ``LiveSession``: the thin I/O shell of a phone call.

The caller's μ-law goes to the model at its input rate; the model's speech goes back in 20 ms
frames with a mark after each utterance (``playout``); on OpenAI with ``OPENAI_PHONE_CONFIG``
the μ-law goes both ways as is. When the model is interrupted the bridge sends ``clear`` at
once (and on OpenAI truncates the assistant item at what the caller heard). A tool named in
``PhoneOptions.hang_up_tools`` (``end_call``) acts after what was said before it: when it
succeeds, the bridge waits (at most ``hang_up_timeout``) for the mark that follows the audio
sent before the call, then closes the stream, so the TwiML's next verb (``<Hangup/>``) runs
after the goodbye was heard. When the caller hangs up (``stop``), the session is closed: every
running call gets its fate and the Live connection closes with 1000; a caller who hangs up while
the session is still opening abandons the opening. When the Live session ends on its own
(``SessionEndedError``) the stream is closed: 1000 and ``session_closed`` for a normal close by
the service, 1011 and ``session_failed`` otherwise. Every call ends in one ``CallEnded``. DTMF
keys reach the listeners as ``DtmfPressed`` and, with ``dtmf_to_model``, the model as text. Each
call is logged twice, at INFO on ``livebridge.phone``: when its ``start`` arrives and when it ends
(its duration, its tool calls by outcome, why it ended).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

import anyio
from anyio.abc import TaskGroup

from livebridge.errors import SessionEndedError
from livebridge.live.session import LiveSession
from livebridge.phone.audio import PHONE_RATE, Resampler, is_speech, pcm16_to_ulaw, ulaw_to_pcm16
from livebridge.phone.playout import Playout
from livebridge.phone.twilio import (
    Dtmf,
    MarkEchoed,
    MediaIn,
    StreamEvent,
    StreamStarted,
    StreamStopped,
    TwilioStream,
)
from livebridge.protocol.events import (
    AudioOut,
    Closed,
    Interrupted,
    ToolCallSettled,
    ToolCallStarted,
)
from livebridge.protocol.events import TurnComplete as ModelTurnComplete

log = logging.getLogger("livebridge.phone")

#: An OpenAI Realtime session config that takes and sends the call's μ-law as is (no
#: resampling either way): pass it as ``config`` to ``LiveSession.connect``.
OPENAI_PHONE_CONFIG: dict[str, Any] = {
    "audio": {
        "input": {"format": {"type": "audio/pcmu"}},
        "output": {"format": {"type": "audio/pcmu"}},
    }
}

#: How a call ended: the caller hung up (``stop``), a hang-up tool closed it, the Live session
#: ended, the Live session could not open or failed (the stream is closed with 1011), or the
#: WebSocket went away without a ``stop``.
EndReason = Literal["caller_hung_up", "hung_up", "session_closed", "session_failed", "disconnected"]


@dataclass(frozen=True, slots=True)
class PhoneOptions:
    """How a bridge runs a call.

    ``hang_up_tools``: tools whose success ends the call once what was said before them has
    been heard, waiting at most ``hang_up_timeout`` seconds for it. ``dtmf_to_model``: each key
    pressed is also sent to the model as ``dtmf_text``. ``start_timeout``: how long a new
    WebSocket may take to send ``start``.
    """

    hang_up_tools: frozenset[str] = frozenset({"end_call"})
    hang_up_timeout: float = 10.0
    dtmf_to_model: bool = False
    dtmf_text: str = "The caller pressed {digit}."
    start_timeout: float = 10.0


@dataclass(frozen=True, slots=True)
class CallAnswered:
    """A stream started and its Live session is open."""

    start: StreamStarted


@dataclass(frozen=True, slots=True)
class DtmfPressed:
    digit: str


@dataclass(frozen=True, slots=True)
class ModelAnswered:
    """The latency a caller feels: end of their speech → the model's first audio sent."""

    latency: float


@dataclass(frozen=True, slots=True)
class BargedIn:
    """The caller spoke over the model: ``clear`` was sent, ``played`` seconds of the
    utterance were heard and ``unheard`` dropped."""

    played: float
    unheard: float


@dataclass(frozen=True, slots=True)
class MarkHeard:
    """A mark came back ``lag`` seconds after its audio should have played."""

    name: str
    lag: float


@dataclass(frozen=True, slots=True)
class FrameSkipped:
    """A media-stream frame was skipped (the codec, ``twilio.TwilioStream``, says why)."""

    reason: str


@dataclass(frozen=True, slots=True)
class CallEnded:
    """The call is over; ``answered``: it had started (``CallAnswered`` came before);
    ``marks``: those sent before each hang-up tool ran; ``call_sid`` (empty before ``start``);
    ``duration``: seconds from the stream's opening; ``tool_calls``: how many calls had each
    ending (``ok``, ``error``..., or the fate ``cancelled``/``orphaned`` when nothing was
    answered: ``ToolCallSettled.ending``)."""

    reason: EndReason
    marks: tuple[str, ...] = field(default_factory=tuple)
    answered: bool = True
    call_sid: str = ""
    duration: float = field(default=0.0, compare=False)  # a clock's reading: not compared
    tool_calls: dict[str, int] = field(default_factory=dict)


PhoneEvent: TypeAlias = (
    CallAnswered | DtmfPressed | ModelAnswered | BargedIn | MarkHeard | FrameSkipped | CallEnded
)


class CallSocket(Protocol):
    """The media stream's WebSocket as the bridge uses it (``asgi.StarletteCallSocket``)."""

    async def receive(self) -> str | bytes | None:
        """The next message; None once the provider's side closed or went away."""
        ...

    async def send(self, text: str) -> None:
        """Send a message; nothing happens once the socket is closed."""
        ...

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Close the stream (again: nothing happens)."""
        ...


class MediaCodec(Protocol):
    """A provider's media-stream messages, without I/O (``twilio.TwilioStream``): frames in →
    ``StreamStarted``, ``MediaIn``, ``MarkEchoed``, ``Dtmf``, ``StreamStopped``; the frames out
    that play μ-law, mark a point in it, and drop what is buffered. Another provider's stream
    is another codec; the bridge is the same."""

    @property
    def last_skipped(self) -> str | None:
        """Why the latest frame was skipped, if it was."""
        ...

    def receive(self, text: str | bytes) -> StreamEvent | None: ...

    def media(self, ulaw: bytes) -> str: ...

    def mark(self, name: str) -> str: ...

    def clear(self) -> str: ...


#: Opens the Live session of one call, given its ``start`` (``customParameters`` and all).
SessionOpener = Callable[[StreamStarted], AbstractAsyncContextManager[LiveSession]]
Listener = Callable[[PhoneEvent], None]


class PhoneBridge:
    """Serves Media Streams WebSockets, each as one call with its own ``LiveSession``."""

    def __init__(
        self,
        open_session: SessionOpener,
        *,
        options: PhoneOptions | None = None,
        listeners: Sequence[Listener] = (),
        clock: Callable[[], float] = time.monotonic,
        codec: Callable[[], MediaCodec] = TwilioStream,
    ) -> None:
        self.open_session = open_session
        self.codec = codec
        self.options = options or PhoneOptions()
        self.listeners = tuple(listeners)
        self.clock = clock

    async def serve(self, websocket: CallSocket) -> EndReason:
        """Run one call on an accepted WebSocket until it ends; how it ended. Every way out
        emits one ``CallEnded`` (a cancelled call as ``disconnected``)."""
        call = _Call(self, websocket, self.codec())
        reason: EndReason = "disconnected"
        try:
            reason = await self._serve(call)
        finally:
            call.finish(reason)
        return reason

    async def _serve(self, call: _Call) -> EndReason:
        websocket = call.websocket
        try:
            with anyio.fail_after(self.options.start_timeout):
                start = await call.until_start()
        except TimeoutError:
            await websocket.close(1008, "no start message")
            return "disconnected"
        if start is None:
            return "disconnected"
        sid = call.call_sid = start.call_sid or "?"
        log.info(
            "call %s started: stream %s, parameters %s",
            sid,
            start.stream_sid or "?",
            ", ".join(sorted(start.custom_parameters)) or "none",
        )
        try:
            reason = await call.answer(start)
        except SessionEndedError as ended:  # the service or the network ended it mid-call
            log.warning("call %s: the Live session ended: %s", sid, ended.reason)
            if ended.error is None:
                await websocket.close()
                return "session_closed"
            await websocket.close(1011, "the Live session failed")
            return "session_failed"
        except Exception as exc:  # the model could not be reached, or the session failed
            log.error("call %s: the Live session failed: %s", sid, exc)
            await websocket.close(1011, "the Live session failed")
            return "session_failed"
        await websocket.close()  # after the session: its calls were given their fates
        return reason


class _Call:
    """The state of one call between the two loops that move its audio."""

    def __init__(self, bridge: PhoneBridge, websocket: CallSocket, stream: MediaCodec):
        self.bridge = bridge
        self.options = bridge.options
        self.websocket = websocket
        self.stream = stream
        self.playout = Playout()
        self.session: LiveSession | None = None
        self.inbound: Resampler | None = None
        self.outbound: Resampler | None = None
        self.reason: EndReason | None = None
        self.hang_marks: dict[str, str] = {}  # hang-up call id → the mark before it
        self.early_keys: list[str] = []  # DTMF pressed while the session opened
        self.speech_ended: float | None = None  # the caller's, awaiting the model's answer
        self.changed = anyio.Event()  # set on each mark echoed, then replaced
        self.began = bridge.clock()
        self.call_sid = ""
        self.outcomes: Counter[str] = Counter()  # tool calls settled, by ending

    def emit(self, event: PhoneEvent) -> None:
        for listener in self.bridge.listeners:
            try:
                listener(event)
            except Exception:
                log.exception("a phone listener failed on %r", event)

    def finish(self, reason: EndReason) -> None:
        """Log the call's end and emit its one ``CallEnded``."""
        answered = self.session is not None
        duration = self.bridge.clock() - self.began
        tools = dict(sorted(self.outcomes.items()))
        counted = ", ".join(f"{n} {kind}" for kind, n in tools.items()) or "none"
        if self.call_sid:
            log.info(
                "call %s ended after %.1f s (%s): tool calls %s",
                self.call_sid,
                duration,
                reason,
                counted,
            )
        else:
            log.info("a stream ended after %.1f s without a valid start (%s)", duration, reason)
        marks = tuple(self.hang_marks.values())
        self.emit(CallEnded(reason, marks, answered, self.call_sid, duration, tools))

    async def count_late_fates(self, session: LiveSession) -> None:
        """Count the calls settled as the session closed, which no loop read any more."""
        with anyio.move_on_after(1.0):
            async for event in session.events():
                if isinstance(event, ToolCallSettled):
                    self.outcomes[event.ending] += 1

    def _receive(self, text: str | bytes) -> object:
        event = self.stream.receive(text)
        if self.stream.last_skipped is not None:
            self.emit(FrameSkipped(self.stream.last_skipped))
        return event

    async def until_start(self) -> StreamStarted | None:
        while (text := await self.websocket.receive()) is not None:
            event = self._receive(text)
            if isinstance(event, StreamStarted):
                return event
            if isinstance(event, StreamStopped):
                return None
        return None

    async def answer(self, start: StreamStarted) -> EndReason:
        """Open the Live session while reading the caller, then run the call. A caller who
        hangs up meanwhile abandons the opening: its connection to the service is closed."""
        gone: EndReason | None = None
        try:
            async with anyio.create_task_group() as tg:
                watching = anyio.CancelScope()
                stopped = anyio.Event()

                async def watch() -> None:
                    nonlocal gone
                    try:
                        with watching:
                            gone = await self._until_gone()
                            tg.cancel_scope.cancel()  # the opening, or the session just opened
                    finally:
                        stopped.set()

                tg.start_soon(watch)
                async with self.bridge.open_session(start) as session:
                    watching.cancel()  # the caller's frames are ``_from_caller``'s from now on
                    await stopped.wait()
                    self.session = session
                    self.emit(CallAnswered(start))
                    if self.options.dtmf_to_model:  # keys pressed while it opened
                        for digit in self.early_keys:
                            await session.send_text(self.options.dtmf_text.format(digit=digit))
                    reason = await self.run()
                await self.count_late_fates(session)
                return reason
        except BaseExceptionGroup as group:  # the session's own error, not a group of one
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        log.info("call %s: the caller left while the Live session opened", start.call_sid or "?")
        return gone or "disconnected"

    async def _until_gone(self) -> EndReason:
        """Read the caller until they leave: what they say before the model is there is
        not kept (Twilio streams from the first ring); the keys they press are."""
        while (text := await self.websocket.receive()) is not None:
            event = self._receive(text)
            if isinstance(event, Dtmf):
                self.emit(DtmfPressed(event.digit))
                self.early_keys.append(event.digit)
            elif isinstance(event, StreamStopped):
                return "caller_hung_up"
        return "disconnected"

    async def run(self) -> EndReason:
        async with anyio.create_task_group() as tg:

            async def first(loop: Callable[[TaskGroup], Awaitable[EndReason]]) -> None:
                reason = await loop(tg)
                if self.reason is None:
                    self.reason = reason
                tg.cancel_scope.cancel()

            tg.start_soon(first, self._from_caller)
            tg.start_soon(first, self._from_model)
        return self.reason or "disconnected"

    # -- the caller's side -------------------------------------------------------------------

    async def _from_caller(self, tg: TaskGroup) -> EndReason:
        session = self._session()
        if session.input_encoding == "pcm16":
            self.inbound = Resampler(PHONE_RATE, session.input_rate)
        while (text := await self.websocket.receive()) is not None:
            event = self._receive(text)
            if isinstance(event, MediaIn):
                await self._caller_audio(session, event.ulaw)
            elif isinstance(event, MarkEchoed):
                echo = self.playout.echoed(event.name, self.bridge.clock())
                if echo is not None:
                    self.emit(MarkHeard(echo.name, echo.lag))
                self._changed()
            elif isinstance(event, Dtmf):
                self.emit(DtmfPressed(event.digit))
                if self.options.dtmf_to_model:
                    await session.send_text(self.options.dtmf_text.format(digit=event.digit))
            elif isinstance(event, StreamStopped):
                return "caller_hung_up"
        return "disconnected"

    async def _caller_audio(self, session: LiveSession, ulaw: bytes) -> None:
        pcm = ulaw_to_pcm16(ulaw)
        if is_speech(pcm):
            self.speech_ended = self.bridge.clock()  # the end of the latest speech heard
        if self.inbound is None:  # the session takes μ-law as is (OpenAI audio/pcmu)
            await session.send_audio(ulaw)
            return
        resampled = self.inbound(pcm)
        if resampled:
            await session.send_audio(resampled, self.inbound.target)

    def _changed(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    # -- the model's side --------------------------------------------------------------------

    async def _from_model(self, tg: TaskGroup) -> EndReason:
        session = self._session()
        hang_up = self.options.hang_up_tools
        async for event in session.events():
            if isinstance(event, ToolCallSettled):
                self.outcomes[event.ending] += 1
            if isinstance(event, AudioOut):
                await self._model_audio(event)
            elif isinstance(event, ModelTurnComplete):
                await self._end_utterance()
            elif isinstance(event, Interrupted):
                await self._barge_in()
            elif isinstance(event, ToolCallStarted) and event.name in hang_up:
                self.hang_marks[event.call_id] = await self._mark()
            elif isinstance(event, ToolCallSettled) and event.call_id in self.hang_marks:
                if event.outcome == "ok":
                    tg.start_soon(self._hang_up, tg, self.hang_marks[event.call_id])
            elif isinstance(event, Closed):
                break
        return "session_closed"

    async def _model_audio(self, event: AudioOut) -> None:
        if event.encoding == "pcmu":  # already what Twilio plays
            await self._send_audio(event.data)
            return
        if self.outbound is None or self.outbound.source != event.rate:
            self.outbound = Resampler(event.rate, PHONE_RATE)
        await self._send_audio(pcm16_to_ulaw(self.outbound.view(event.data)))

    async def _send_audio(self, ulaw: bytes) -> None:
        now = self.bridge.clock()
        frames = self.playout.audio(ulaw, now)
        if frames and self.speech_ended is not None:
            self.emit(ModelAnswered(max(0.0, now - self.speech_ended)))
            self.speech_ended = None
        for frame in frames:
            await self.websocket.send(self.stream.media(frame))

    async def _mark(self) -> str:
        """Close the audio sent so far with a mark; its name."""
        if self.outbound is not None:
            tail = self.outbound.flush()
            if tail:
                await self._send_audio(pcm16_to_ulaw(tail))
        frames, name = self.playout.mark(self.bridge.clock())
        for frame in frames:
            await self.websocket.send(self.stream.media(frame))
        await self.websocket.send(self.stream.mark(name))
        return name

    async def _end_utterance(self) -> None:
        if self.outbound is not None:
            tail = self.outbound.flush()
            if tail:
                await self._send_audio(pcm16_to_ulaw(tail))
        frames, name = self.playout.end_utterance(self.bridge.clock())
        for frame in frames:
            await self.websocket.send(self.stream.media(frame))
        if name is not None:
            await self.websocket.send(self.stream.mark(name))

    async def _barge_in(self) -> None:
        if self.outbound is not None:
            self.outbound.reset()
        barge = self.playout.interrupt(self.bridge.clock())
        if barge is None:
            return
        await self.websocket.send(self.stream.clear())
        self.emit(BargedIn(barge.played, barge.unheard))
        await self._session().truncate_audio(barge.played)
        self._changed()  # a hang-up waiting on a cleared mark goes ahead

    async def _hang_up(self, tg: TaskGroup, mark: str) -> None:
        """End the call once the audio before ``mark`` was heard (or the timeout passed)."""
        with anyio.move_on_after(self.options.hang_up_timeout):
            while self.playout.pending(mark):
                await self.changed.wait()
        if self.reason is None:
            self.reason = "hung_up"
        await self.websocket.close()
        tg.cancel_scope.cancel()

    def _session(self) -> LiveSession:
        assert self.session is not None
        return self.session
