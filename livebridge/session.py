"""``LiveSession``: the actor that runs one Gemini Live conversation and answers its tool calls.

The session is a thin I/O shell. Decisions live elsewhere: which answers go out and when
(``ledger``), how calls run (``dispatch``), when to reconnect (``resume``), how messages are
encoded (``transport`` / ``wire``). Inside one anyio task group it runs

- a connection manager: connect, serve, switch over on ``goAway``, reconnect after a drop;
- per connection, a reader that handles every field of every server message, a writer that sends
  tool answers and the app's input in order, and a go-away watcher;
- one task per ``toolCall`` batch, running the handlers through the dispatcher.

Handlers outlive connections: a call keeps running across a reconnect and its answer goes to the
new connection if the resumed session knows the call, and is dropped (``orphaned``) if not.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup, TaskStatus
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from livebridge import resume, wire
from livebridge.adapters import gemini_live
from livebridge.calls import Call, Outcome, Partial
from livebridge.dispatch import CallPolicy, Dispatcher
from livebridge.errors import ConnectionLostError, SessionClosedError
from livebridge.events import (
    AudioOut,
    Closed,
    EventBuffer,
    GoAway,
    InputTranscript,
    Interrupted,
    OutputTranscript,
    Resumed,
    SessionEvent,
    TextOut,
    ToolCallSettled,
    ToolCallStarted,
    TurnComplete,
)
from livebridge.ledger import CallLedger, Fate, LiveCall, Outgoing, Via
from livebridge.observe import (
    AnswerSent,
    CallOrphaned,
    Direction,
    MessageSeen,
    Observer,
    Reconnected,
    SessionClosed,
    SessionOpened,
    emit,
)
from livebridge.tools import ToolRegistry
from livebridge.transport import (
    Audio,
    ClientItem,
    MalformedMessage,
    Signal,
    Text,
    ToolAnswers,
    Transport,
    TransportClosed,
    TransportKind,
    message_kind,
    open_transport,
)

log = logging.getLogger("livebridge.session")

AudioPolicy = Literal["send", "hold", "drop"]

#: After the grace period, how long cancelled handlers get to unwind and have their answers sent.
_CANCEL_FLUSH_SECONDS = 1.0

_SERVER_FIELDS = tuple(wire.ServerMessage.__struct_fields__)
_SERVER_KINDS = {name: wire.camel(name) for name in _SERVER_FIELDS}

#: Messages counted locally before their ``MessageSeen`` events go to the observers.
_SEEN_BATCH = 256


@dataclass(frozen=True, slots=True)
class SessionOptions:
    """How a ``LiveSession`` behaves; every default is the safe one.

    ``audio_during_blocking`` decides what happens to microphone audio sent while a BLOCKING call
    waits for its answer. ``"hold"`` (default) keeps up to ``held_audio_seconds`` of it and sends
    it right after the answer: nothing is lost and the service is never sent audio during a
    pending blocking call (reported to abort the session with 1008). ``"send"`` streams it
    anyway (barge-in keeps working), ``"drop"`` discards it.

    ``tls_read_buffer`` replaces asyncio's 256 KiB per-connection TLS read buffer (0 keeps it).
    """

    transport: TransportKind = "wire"
    audio_during_blocking: AudioPolicy = "hold"
    held_audio_seconds: float = 10.0
    event_capacity: int = 1024
    shutdown_grace: float = 5.0
    reconnect_attempts: int = 5
    go_away_margin: float = 1.0
    keepalive: dict[str, float] = field(default_factory=resume.keepalive_settings)
    tls_read_buffer: int = 8 * 1024


class LiveSession:
    """One Live conversation with its tool calls; create it with ``LiveSession.connect``."""

    __slots__ = (
        "_accepting",
        "_audio_dropped",
        "_client",
        "_clock",
        "_closed",
        "_config",
        "_connection_tg",
        "_dispatcher",
        "_events",
        "_go_away_deadline",
        "_going_away",
        "_held",
        "_held_bytes",
        "_idle",
        "_last_call_message",
        "_last_handle_message",
        "_leave",
        "_ledger",
        "_messages_seen",
        "_model",
        "_observers",
        "_outbox",
        "_policy",
        "_seen",
        "_seen_pending",
        "_tg",
        "_transport",
        "_turn",
        "_wake",
        "_writing",
        "handle",
        "options",
        "session_id",
        "tools",
    )

    def __init__(
        self,
        client: genai.Client,
        *,
        model: str,
        tools: ToolRegistry,
        config: types.LiveConnectConfigOrDict | None = None,
        policy: CallPolicy | None = None,
        observers: Sequence[Observer] = (),
        options: SessionOptions | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.options = options or SessionOptions()
        self.tools = tools
        self.handle: str | None = None
        self.session_id: str | None = None
        self._client = client
        self._model = model
        self._config = _live_config(config, tools)
        self._observers = tuple(observers)
        self._clock = clock
        self._policy = policy or CallPolicy()
        self._dispatcher: Dispatcher | None = None
        self._ledger = CallLedger(
            encode=gemini_live.encode, max_frame_bytes=self._policy.max_frame_bytes
        )
        self._events = EventBuffer(self.options.event_capacity)
        self._outbox: deque[ClientItem] = deque()
        self._held: deque[Audio] = deque()
        self._held_bytes = 0
        self._wake = _Wakeup()
        self._idle: anyio.Event | None = None  # set by the writer once no call is live
        self._transport: Transport | None = None
        self._tg: TaskGroup | None = None
        self._accepting = True
        self._closed: Closed | None = None
        self._turn = 0
        self._going_away = False  # this connection got goAway
        self._go_away_deadline = 0.0
        self._messages_seen = 0
        self._last_call_message = -1
        self._last_handle_message = -1
        self._audio_dropped = 0
        self._writing = False  # a send is in progress (the writer's or send_audio's own)
        self._seen: dict[tuple[Direction, str], int] = {}
        self._seen_pending = 0
        self._connection_tg: TaskGroup | None = None
        self._leave: Callable[[resume.CloseDecision], None] = _not_connected

    # -- lifecycle ---------------------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def connect(
        cls,
        client: genai.Client,
        *,
        model: str,
        tools: ToolRegistry,
        config: types.LiveConnectConfigOrDict | None = None,
        policy: CallPolicy | None = None,
        observers: Sequence[Observer] = (),
        options: SessionOptions | None = None,
    ) -> AsyncIterator[LiveSession]:
        """Open a session; leaving the block shuts it down (see ``aclose``).

        Raises a ``LiveSessionError`` subclass when the first connection fails (wrong model,
        bad key, unreachable service): the message says what to do.
        """
        session = cls(
            client,
            model=model,
            tools=tools,
            config=config,
            policy=policy,
            observers=observers,
            options=options,
        )
        try:
            async with anyio.create_task_group() as tg:
                session._tg = tg
                await tg.start(session._run)
                try:
                    yield session
                finally:
                    with anyio.CancelScope(shield=True):
                        await session.aclose()
                    tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            raise _sole(group) from None

    async def aclose(self) -> None:
        """Stop input, give running calls ``shutdown_grace`` seconds, send what can be sent, close.

        Calls still running after the grace period are cancelled; while the socket is open their
        cancellation is sent as an error answer, and whatever cannot be sent ends ``orphaned``.
        Closing twice is harmless.
        """
        if not self._accepting:
            return
        self._accepting = False
        self._ledger.shutdown()
        with anyio.move_on_after(self.options.shutdown_grace):
            await self._wait_idle()
        late = self._ledger.shutdown()
        if late and self._dispatcher is not None:
            for call_id in late:
                self._dispatcher.cancel(call_id)
            with anyio.move_on_after(_CANCEL_FLUSH_SECONDS):
                await self._wait_idle()
        self._ledger.close(self._clock())
        if self._dispatcher is not None:  # handlers that ignored their cancellation
            await self._dispatcher.aclose(0.0)
        self._finish(Closed("closed by the app"))

    # -- app-facing API ----------------------------------------------------------------------

    async def send_text(self, text: str) -> None:
        """Send a user text turn (``realtimeInput.text``, accepted by every Live model)."""
        self._enqueue(Text(text))

    async def send_audio(self, pcm16: bytes, rate: int = 16_000) -> None:
        """Send microphone audio: 16-bit little-endian mono PCM at ``rate`` Hz.

        When nothing else is queued and no call is pending, the frame goes straight onto the
        socket from the caller's task (waiting only if the socket is backed up); otherwise it
        is queued behind what came first and the ``audio_during_blocking`` policy applies.
        """
        if len(pcm16) % 2:
            raise ValueError("16-bit PCM must have an even number of bytes")
        audio = Audio(bytes(pcm16), rate)
        transport = self._transport
        if (
            transport is None
            or self._writing
            or self._outbox
            or self._held
            or not self._ledger.idle
            or not self._accepting
        ):
            self._enqueue(audio)
            return
        self._writing = True
        try:
            await transport.send(audio)
        except TransportClosed:  # the connection manager reconnects; the frame goes then
            self._outbox.append(audio)
            self._wakeup()
            return
        finally:
            self._writing = False
        if self._observers:
            self._count_seen("sent", "realtimeInput")

    async def send_activity_start(self) -> None:
        """Mark the start of user speech (when automatic activity detection is off)."""
        self._enqueue(Signal("activity_start"))

    async def send_activity_end(self) -> None:
        """Mark the end of user speech (when automatic activity detection is off)."""
        self._enqueue(Signal("activity_end"))

    async def send_audio_stream_end(self) -> None:
        """Tell the service the microphone stopped (flushes its audio buffer)."""
        self._enqueue(Signal("audio_stream_end"))

    async def events(self) -> AsyncIterator[SessionEvent]:
        """Every event of the session in order; ends after the terminal ``Closed`` event."""
        while (event := await self._events.get()) is not None:
            yield event

    async def next_event(self) -> SessionEvent | None:
        """The next event, or ``None`` once the session ended and every event was read."""
        return await self._events.get()

    @property
    def closed(self) -> Closed | None:
        """The terminal event once the session ended, else ``None``."""
        return self._closed

    @property
    def audio_dropped(self) -> int:
        """Audio chunks discarded by the ``drop`` policy or an overfull hold buffer."""
        return self._audio_dropped

    # -- connection management ---------------------------------------------------------------

    async def _run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        reason = "connect"
        delays = resume.backoff()
        attempts = 0
        ready = False
        while self._closed is None:
            decision: resume.CloseDecision | None = None
            try:
                async with self._client.aio.live.connect(
                    model=self._model, config=self._config_for(self.handle)
                ) as sdk_session:
                    _tune_connection(sdk_session, self.options)
                    transport = open_transport(self.options.transport, sdk_session)
                    self._attach(transport, reason)
                    attempts = 0
                    if not ready:
                        ready = True
                        task_status.started()
                    decision = await self._serve(transport)
            except TransportClosed as exc:
                decision = self._decide(exc.code, exc.reason)
            except genai_errors.APIError as exc:
                decision = self._decide(exc.code, str(exc.details or exc.message or ""))
            except OSError as exc:
                decision = self._decide(None, f"network error: {exc}")
            finally:
                self._detach()
            if self._closed is not None:
                return
            assert decision is not None
            if not ready:
                raise decision.error or ConnectionLostError(
                    f"the first connection closed at once ({decision.reason})"
                )
            if not decision.retry:
                self._finish(Closed(_ended(decision), decision.error))
                return
            if self.handle is None:
                lost = ConnectionLostError(
                    f"the connection ended ({decision.reason}) before the service issued a "
                    "resumption handle, so the conversation cannot continue; start a new session"
                )
                self._finish(Closed(str(lost), lost))
                return
            if decision.reason == "go_away" and decision.error is None:
                reason = "go_away"
                continue
            attempts += 1
            if attempts > self.options.reconnect_attempts:
                self._finish(Closed(f"gave up after {attempts - 1} reconnects", decision.error))
                return
            reason = decision.reason
            await anyio.sleep(next(delays))

    def _decide(self, code: int | None, reason: str) -> resume.CloseDecision:
        decision = resume.classify_close(code, reason, after_go_away=self._going_away)
        log.info("connection closed (%s %r): %s", code, reason, decision.reason)
        return decision

    def _config_for(self, handle: str | None) -> types.LiveConnectConfig:
        config = self._config.model_copy()
        config.session_resumption = types.SessionResumptionConfig(handle=handle)
        return config

    def _attach(self, transport: Transport, reason: str) -> None:
        now = self._clock()
        resumed = reason != "connect"
        self.session_id = self.session_id or transport.session_id
        if self._dispatcher is None:
            self._dispatcher = Dispatcher(
                self.tools,
                policy=self._policy,
                observers=self._observers,
                session_id=self.session_id,
                answer_seen=self._ledger.answer_seen,
            )
            emit(self._observers, SessionOpened(self.session_id))
        orphaned = self._ledger.resumed(self.handle if resumed else None, now)
        self._transport = transport
        self._going_away = False
        if resumed:
            emit(self._observers, Reconnected(self.session_id, reason))
            self._events.put(Resumed(reason, tuple(orphaned)))
        self._report_fates()
        self._wakeup()

    def _detach(self) -> None:
        self._transport = None
        self._ledger.disconnected()

    async def _serve(self, transport: Transport) -> resume.CloseDecision:
        """Read and write on one connection until it ends; returns why it ended."""
        ended: list[resume.CloseDecision] = []
        async with anyio.create_task_group() as tg:

            def leave(decision: resume.CloseDecision) -> None:
                ended.append(decision)
                tg.cancel_scope.cancel()

            self._leave = leave
            self._connection_tg = tg
            tg.start_soon(self._guarded, self._write(transport), leave)
            await self._guarded(self._read(transport), leave)  # in this task: one task fewer
        return ended[0]

    async def _guarded(
        self, work: Coroutine[Any, Any, None], leave: Callable[[resume.CloseDecision], None]
    ) -> None:
        try:
            await work
        except TransportClosed as exc:
            leave(self._decide(exc.code, exc.reason))
        except OSError as exc:
            leave(self._decide(None, f"network error: {exc}"))

    # -- reading -----------------------------------------------------------------------------

    async def _read(self, transport: Transport) -> None:
        while True:
            try:
                message = await transport.recv()
            except MalformedMessage as exc:
                log.warning("skipped a malformed server message: %s", exc)
                continue
            self._messages_seen += 1
            try:
                self._handle(message)
            except Exception:
                log.exception("could not handle a server message; the session goes on")
            self._ledger.server_message()

    def _handle(self, message: wire.ServerMessage) -> None:
        if self._observers:
            for name in _SERVER_FIELDS:
                if getattr(message, name) is not None:
                    self._count_seen("received", _SERVER_KINDS[name])
        content = message.server_content
        if content is not None:
            self._on_content(content, message.usage_metadata)
        if message.tool_call is not None:
            self._on_calls(message.tool_call.function_calls, via="tool_call")
        if message.tool_call_cancellation is not None:
            self._on_cancellation(message.tool_call_cancellation.ids)
        if message.session_resumption_update is not None:
            update = message.session_resumption_update
            if update.resumable and update.new_handle:
                self.handle = update.new_handle
                self._ledger.handle_issued(update.new_handle)
                self._last_handle_message = self._messages_seen
                self._wakeup()
        if message.go_away is not None:
            self._on_go_away(message.go_away)

    def _on_content(self, content: wire.ServerContent, usage: wire.UsageMetadata | None) -> None:
        put = self._events.put
        if content.interrupted:
            put(Interrupted())
        if content.model_turn is not None:
            calls: list[wire.FunctionCall] = []
            for part in content.model_turn.parts:
                if part.inline_data is not None and part.inline_data.data:
                    put(AudioOut(wire.b64decode(part.inline_data.data), _rate(part.inline_data)))
                if part.text and not part.thought:
                    put(TextOut(part.text))
                if part.function_call is not None:
                    calls.append(part.function_call)
            if calls:
                self._on_calls(calls, via="model_turn")
        if content.input_transcription is not None and content.input_transcription.text:
            t = content.input_transcription
            put(InputTranscript(t.text or "", bool(t.finished)))
        if content.output_transcription is not None and content.output_transcription.text:
            t = content.output_transcription
            put(OutputTranscript(t.text or "", bool(t.finished)))
        if content.turn_complete:
            self._turn += 1
            put(TurnComplete(_usage(usage), content.turn_complete_reason))
            self._flush_seen()

    def _on_calls(self, function_calls: Sequence[wire.FunctionCall], *, via: Via) -> None:
        live_calls: list[LiveCall] = []
        for fc in function_calls:
            if not fc.id:
                log.error(
                    "the service sent a call to %r without an id; it cannot be answered "
                    "(the Developer API always sends ids: is this a Vertex endpoint?)",
                    fc.name,
                )
                continue
            tool = self.tools.get(fc.name)
            live_calls.append(
                LiveCall(
                    call=Call(fc.id, fc.name, fc.args if fc.args is not None else {}),
                    behavior=tool.behavior if tool else "BLOCKING",
                    scheduling=tool.scheduling if tool else None,
                    streaming=tool.streaming if tool else False,
                )
            )
        if not live_calls:
            return
        self._last_call_message = self._messages_seen
        admitted = self._ledger.receive(live_calls, self._clock(), via=via)
        self._report_fates()
        if not admitted:
            return
        behaviors = {lc.call.id: lc.behavior for lc in live_calls}
        for call in admitted:
            self._events.put(ToolCallStarted(call.id, call.name, call.args, behaviors[call.id]))
        assert self._tg is not None
        self._tg.start_soon(self._run_batch, admitted, self._turn)

    async def _run_batch(self, calls: list[Call], turn: int) -> None:
        await self._require_dispatcher().run(
            calls, turn=turn, on_settled=self._on_settled, on_partial=self._on_partial
        )

    def _on_settled(self, outcome: Outcome) -> None:
        self._ledger.settle(outcome)
        self._after_ledger_change()

    def _on_partial(self, partial: Partial) -> None:
        self._ledger.partial(partial)
        self._after_ledger_change()

    def _on_cancellation(self, ids: Sequence[str]) -> None:
        dispatcher = self._require_dispatcher()
        for call_id in self._ledger.cancel(ids, self._clock()):
            dispatcher.cancel(call_id)
        self._after_ledger_change()

    def _on_go_away(self, go_away: wire.GoAway) -> None:
        try:
            time_left = resume.parse_duration(go_away.time_left or "0s")
        except ValueError:
            time_left = 0.0
        self._events.put(GoAway(time_left))
        if not self._going_away:
            self._going_away = True
            self._go_away_deadline = resume.reconnect_deadline(
                self._clock(), time_left, margin=self.options.go_away_margin
            )
            assert self._connection_tg is not None
            self._connection_tg.start_soon(self._switch_when_ready)

    async def _switch_when_ready(self) -> None:
        """After ``goAway``: leave once every call is answered and covered by a handle.

        At the deadline it leaves anyway; calls the newest handle does not know are orphaned.
        """
        with anyio.move_on_after(max(0.0, self._go_away_deadline - self._clock())):
            while not (self._ledger.idle and self._last_handle_message > self._last_call_message):
                await self._wait_change()
        self._leave(resume.CloseDecision(True, True, "go_away", None))

    # -- writing -----------------------------------------------------------------------------

    async def _write(self, transport: Transport) -> None:
        while True:
            item = self._next_item()
            if item is None:
                await self._wait_change()
                continue
            self._writing = True
            try:
                await transport.send(
                    ToolAnswers(item.function_responses) if isinstance(item, Outgoing) else item
                )
            except TransportClosed:
                if not isinstance(item, Outgoing):  # the ledger requeues its own answers
                    self._outbox.appendleft(item)
                raise
            finally:
                self._writing = False
            if isinstance(item, Outgoing):
                self._ledger.sent(item, self._clock())
                self._report_answers(item)
                self._report_fates()
            if self._observers:
                self._count_seen("sent", message_kind_of(item))

    def _next_item(self) -> Outgoing | ClientItem | None:
        """Take what the writer sends next: tool answers first, then the app's input in order.

        Audio held during a blocking call goes out as soon as the call is answered, ahead of
        newer input.
        """
        ledger = self._ledger
        if ledger.idle:  # nothing to answer and nothing blocking: the common case
            self._set_idle()
            if self._held:
                return self._take_held()
            return self._outbox.popleft() if self._outbox else None
        answers = ledger.drain(self._clock())
        if answers is not None:
            return answers
        self._report_fates()
        if ledger.idle:
            self._set_idle()
        blocking = ledger.blocking_pending
        if not blocking and self._held:
            return self._take_held()
        policy = self.options.audio_during_blocking
        while self._outbox:
            item = self._outbox.popleft()
            if not isinstance(item, Audio) or not blocking or policy == "send":
                return item
            if policy == "hold":
                self._hold(item)
            else:
                self._audio_dropped += 1
        return None

    def _take_held(self) -> Audio:
        held = self._held.popleft()
        self._held_bytes -= len(held.pcm)
        return held

    def _hold(self, audio: Audio) -> None:
        self._held.append(audio)
        self._held_bytes += len(audio.pcm)
        limit = self.options.held_audio_seconds * audio.rate * 2
        while self._held_bytes > limit and self._held:
            self._held_bytes -= len(self._held.popleft().pcm)
            self._audio_dropped += 1

    # -- reporting ---------------------------------------------------------------------------

    def _report_answers(self, sent: Outgoing) -> None:
        outcomes: list[Outcome] = []
        turnarounds: list[float] = []
        behaviors: list[Any] = []
        known: list[bool] = []
        for answer in sent.answered:
            if answer.outcome is None:
                continue
            outcome = answer.outcome
            outcomes.append(outcome)
            turnarounds.append(answer.turnaround)
            behaviors.append(answer.behavior)
            known.append(outcome.name in self.tools)
            self._events.put(
                ToolCallSettled(
                    outcome.call_id,
                    outcome.name,
                    outcome.kind,
                    outcome.latency,
                    answer.turnaround,
                    outcome.response.get("error"),
                )
            )
        if outcomes:
            emit(
                self._observers,
                AnswerSent(self.session_id, outcomes, turnarounds, behaviors, known),
            )

    def _count_seen(self, direction: Direction, kind: str) -> None:
        key = (direction, kind)
        self._seen[key] = self._seen.get(key, 0) + 1
        self._seen_pending += 1
        if self._seen_pending >= _SEEN_BATCH:
            self._flush_seen()

    def _flush_seen(self) -> None:
        """Report the messages counted since the last flush (every turn, batch and at close)."""
        if not self._seen_pending:
            return
        seen, self._seen, self._seen_pending = self._seen, {}, 0
        for (direction, kind), count in seen.items():
            emit(self._observers, MessageSeen(self.session_id, direction, kind, count))

    def _report_fates(self) -> None:
        for fate in self._ledger.take_fates():
            self._report_fate(fate)
        for notice in self._ledger.take_notices():  # duplicates, late cancels: worth a log line
            log.info("call %s: %s (%s)", notice.call_id, notice.detail, notice.kind)

    def _report_fate(self, fate: Fate) -> None:
        if fate.fate == "answered":
            return
        latency = fate.outcome.latency if fate.outcome else 0.0
        self._events.put(ToolCallSettled(fate.call_id, fate.name, fate.fate, latency))
        if fate.fate == "orphaned":
            log.warning("call %s (%s) orphaned: %s", fate.call_id, fate.name, fate.reason)
            orphaned = CallOrphaned(
                self.session_id,
                fate.call_id,
                fate.name,
                fate.behavior,
                fate.reason,
                fate.name in self.tools,
            )
            emit(self._observers, orphaned)

    # -- plumbing ----------------------------------------------------------------------------

    def _enqueue(self, item: ClientItem) -> None:
        if not self._accepting:
            raise SessionClosedError(
                "this session is closing or closed; open a new LiveSession to keep talking"
            )
        self._outbox.append(item)
        self._wakeup()

    def _after_ledger_change(self) -> None:
        self._report_fates()
        self._wakeup()

    def _wakeup(self) -> None:
        self._wake.set()

    async def _wait_change(self) -> None:
        await self._wake.wait()

    def _set_idle(self) -> None:
        if self._idle is not None:
            self._idle.set()
            self._idle = None

    async def _wait_idle(self) -> None:
        while not self._ledger.idle:
            idle = self._idle = anyio.Event()
            self._wakeup()
            await idle.wait()

    def _require_dispatcher(self) -> Dispatcher:
        if self._dispatcher is None:
            raise RuntimeError("the session is not connected yet")
        return self._dispatcher

    def _finish(self, closed: Closed) -> None:
        if self._closed is not None:
            return
        self._closed = closed
        self._accepting = False
        self._report_fates()
        self._flush_seen()
        self._events.put(closed)
        self._events.close()
        emit(self._observers, SessionClosed(self.session_id, closed.reason))
        if self._tg is not None:
            self._tg.cancel_scope.cancel()


class _Wakeup:
    """A wake-up flag for the actor's tasks: ``set()`` any number of times; ``wait()`` returns
    once it is set and clears it. Every task waiting when it is set wakes up.

    Built for the hot path: one event object per wake-up, of the running backend's own class
    (``anyio.Event()`` looks the backend up on every construction).
    """

    __slots__ = ("_event", "_make")

    def __init__(self) -> None:
        self._make: Callable[[], anyio.Event] | None = None
        self._event: anyio.Event | None = None

    def set(self) -> None:
        if self._event is None:
            self._event = self._new()
        self._event.set()

    async def wait(self) -> None:
        event = self._event
        if event is None:
            event = self._event = self._new()
        if event.is_set():
            self._event = None
            await anyio.lowlevel.checkpoint()
            return
        await event.wait()
        if self._event is event:  # the first waiter to wake consumes it
            self._event = None

    def _new(self) -> anyio.Event:
        if self._make is None:
            self._make = type(anyio.Event())
        return self._make()


def _sole(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one exception inside nested single-member groups, else the group itself."""
    inner: BaseException = group
    while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
        inner = inner.exceptions[0]
    return inner


def _not_connected(decision: resume.CloseDecision) -> None:
    raise RuntimeError("no connection is open")


def _ended(decision: resume.CloseDecision) -> str:
    if decision.error is not None:
        return f"session ended: {decision.error}"
    return "the service closed the session"


def message_kind_of(item: Outgoing | ClientItem) -> str:
    return "toolResponse" if isinstance(item, Outgoing) else message_kind(item)


def _live_config(
    config: types.LiveConnectConfigOrDict | None, tools: ToolRegistry
) -> types.LiveConnectConfig:
    """The app's config with the registry's functions declared and resumption switched on."""
    if config is None:
        base = types.LiveConnectConfig()
    elif isinstance(config, types.LiveConnectConfig):
        base = config.model_copy(deep=True)
    else:
        base = types.LiveConnectConfig.model_validate(config)
    declarations = tools.declarations()
    if declarations:
        base.tools = [*(base.tools or []), types.Tool(function_declarations=declarations)]
    return base


def _tune_connection(sdk_session: Any, options: SessionOptions) -> None:
    """Keepalive and buffer sizes for the SDK's websocket (which livebridge does not create).

    websockets reads ``ping_interval``/``ping_timeout`` on every ping, so setting them after
    connecting takes effect. asyncio gives every TLS connection a 256 KiB read buffer; Live
    frames are small, so a smaller one saves most of a session's memory at no CPU cost.
    """
    ws = getattr(sdk_session, "_ws", None)
    if ws is None:
        return
    for name, value in options.keepalive.items():
        if hasattr(ws, name):
            setattr(ws, name, value)
    if options.tls_read_buffer:
        shrink_tls_read_buffer(ws.transport, options.tls_read_buffer)


def shrink_tls_read_buffer(transport: Any, size: int) -> bool:
    """Give an asyncio TLS transport a ``size``-byte read buffer; False if it has none.

    Safe between reads: the event loop asks for the buffer and fills it in one step.
    """
    protocol = getattr(transport, "_ssl_protocol", None)
    if protocol is None or not hasattr(protocol, "_ssl_buffer"):
        return False
    buffer = bytearray(size)
    protocol.max_size = size
    protocol._ssl_buffer = buffer
    protocol._ssl_buffer_view = memoryview(buffer)
    return True


def _rate(blob: wire.Blob) -> int:
    mime = blob.mime_type
    rate = _RATES.get(mime)
    if rate is None:
        rate = _RATES[mime] = _parse_rate(mime)
        if len(_RATES) > 64:  # a misbehaving server must not grow the cache
            _RATES.clear()
    return rate


def _parse_rate(mime: str | None) -> int:
    for piece in (mime or "").split(";"):
        key, _, value = piece.strip().partition("=")
        if key == "rate" and value.isdigit():
            return int(value)
    return 24_000


_RATES: dict[str | None, int] = {}


def _usage(usage: wire.UsageMetadata | None) -> dict[str, Any] | None:
    return wire.to_builtins(usage) if usage is not None else None
