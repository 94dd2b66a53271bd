"""``LiveSession``: the app's handle on one Live conversation and its tool calls, and the
actor that runs it.

What the app calls: connect, send input, read events, leave. Inside the session's task group
the actor runs

- a connection manager: open a connection, serve it, switch over on ``goAway``, reconnect after
  a drop, finish when the protocol says so;
- per connection, a reader that feeds every server message to the protocol, a writer that sends
  what the protocol hands it, and a go-away watcher;
- one task per ``toolCall`` batch, running the handlers through the dispatcher.

Decisions live elsewhere: what a message means and what to do about it (the vendor's
``LiveProtocol``), which answers go out and when (the call ledger), how calls run (the
dispatcher), how a connection is opened (the connector, chosen in ``live.vendors``). This class
only carries them out: it delivers the protocol's events, runs and cancels calls, sends frames.

Handlers outlive connections: a call keeps running across a reconnect and its answer goes to the
new connection if the resumed session knows the call, and is dropped (``orphaned``) if not. When
the session ends for any reason, every call without a fate is orphaned and its handler cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager, nullcontext
from dataclasses import replace
from functools import partial
from typing import Any, Literal, Required, TypedDict, Unpack, assert_never, cast

import anyio
import anyio.lowlevel
from anyio import CancelScope
from anyio.abc import TaskGroup, TaskStatus

from livebridge.calls.call import Outcome, Partial
from livebridge.calls.dispatch import Dispatcher
from livebridge.calls.lives import Outgoing
from livebridge.calls.observers import Observer, emit
from livebridge.calls.policy import CallPolicy
from livebridge.calls.tools import ToolRegistry
from livebridge.errors import (
    LeaseLostError,
    LiveSessionError,
    MalformedMessageError,
    SessionClosedError,
    SessionEndedError,
    TransportClosed,
    UsageError,
)
from livebridge.live.exchange import ExchangeTracker
from livebridge.live.options import SessionOptions
from livebridge.live.vendors import connector_for
from livebridge.protocol.actions import (
    CancelCalls,
    ConfirmCalls,
    Finish,
    Notify,
    Output,
    RunCalls,
    SwitchConnection,
)
from livebridge.protocol.base import Connector
from livebridge.protocol.events import (
    DROPPABLE,
    Closed,
    EventBuffer,
    Resumed,
    SessionEvent,
    ToolCallStarted,
    record_of,
)
from livebridge.protocol.transport import Audio, ClientItem, ProvesReads, Signal, Text, Transport
from livebridge.protocol.wakeup import Wakeup
from livebridge.recording.record import RecordingConnector
from livebridge.store import Store
from livebridge.store.connector import StoreConnector

log = logging.getLogger("livebridge.live.session")

_ACTION_KINDS = frozenset((RunCalls, CancelCalls, ConfirmCalls, Notify, SwitchConnection))
#: Outputs that give the writer and the watchers no work: media, and calls started.
_QUIET = frozenset((*DROPPABLE, ToolCallStarted))
#: App events the observers also hear, in their own words (``events.record_of``).
_VIEWED = (Resumed, Closed)

#: Scheduler turns given to frames already received before the session sends its close frame.
_ARRIVAL_TURNS = 3

#: After the grace period, how long cancelled handlers get to unwind and have their answers sent.
CANCEL_FLUSH_SECONDS = 1.0


#: Sessions created without options or a policy share these (frozen) ones.
_DEFAULT_OPTIONS = SessionOptions()
_DEFAULT_POLICY = CallPolicy()


class SessionArgs(TypedDict, total=False):
    """What ``LiveSession.connect`` (and ``LiveSession(...)``) take after ``client``: each
    parameter is stated once, here."""

    model: str
    """The model name, e.g. ``"gemini-3.8-live"`` or ``"gpt-realtime"``; with the client's backend
    it picks the model profile (``livebridge.profiles``)."""
    tools: Required[ToolRegistry]
    """The ``ToolRegistry`` the model may call; each tool is declared with its behavior stated, as
    the model's profile adapts it."""
    config: Any
    """The vendor's own session config: a ``LiveConnectConfig`` (or dict) for Gemini, a dict of
    ``session.update`` fields for OpenAI."""
    policy: CallPolicy | None
    """The ``CallPolicy`` calls run under (parallelism, per-turn fan-out, timeouts, result and
    frame sizes); default ``CallPolicy()``."""
    observers: Sequence[Observer]
    """Receive every lifecycle event (``PrometheusObserver``, ``TraceObserver``, your own)."""
    options: SessionOptions | None
    """``SessionOptions``: transport, audio during blocking calls, buffers, shutdown grace,
    reconnects, recording, the model profile."""
    connector: Connector | None
    """Opens connections instead of ``client`` and ``model`` (``livebridge.live.vendors``), e.g.
    a connector of your own in tests."""
    store: Store | None
    """Where the conversation outlives this process (``MemoryStore``, ``RedisStore``); needs
    ``conversation``."""
    conversation: str | None
    """The conversation's key in ``store``: another worker resumes it."""
    clock: Callable[[], float]
    """The session's monotonic clock (``time.monotonic``); a test may step it."""


class LiveSession:
    """One Live conversation with its tool calls; open it with ``LiveSession.connect``."""

    __slots__ = (
        "_accepting",
        "_batches",
        "_block",
        "_clock",
        "_closed",
        "_connector",
        "_cut_short",
        "_dispatcher",
        "_ending",
        "_events",
        "_idle",
        "_leave",
        "_leaving",
        "_observers",
        "_ping_owed",
        "_policy",
        "_pong",
        "_protocol",
        "_proves",
        "_send_proven",
        "_store",
        "_switching",
        "_tg",
        "_transport",
        "_waiting_for_room",
        "_wake",
        "_writing",
        "options",
        "tools",
    )

    def __init__(self, client: Any = None, **args: Unpack[SessionArgs]) -> None:
        """The session, not yet connected: the arguments are ``connect``'s."""
        _check_arguments(args)
        options = args.get("options") or _DEFAULT_OPTIONS
        policy = args.get("policy") or _DEFAULT_POLICY
        observers = args.get("observers", ())
        tools = self.tools = args["tools"]
        connector = args.get("connector")
        if connector is None:
            model = args.get("model", "")
            if client is None or not model:
                raise UsageError(
                    "LiveSession needs a client (genai.Client or openai.AsyncOpenAI) and a "
                    "model, or a connector"
                )
            connector = connector_for(
                client,
                model=model,
                tools=tools,
                config=args.get("config"),
                transport=options.transport,
                keepalive=options.keepalive,
                tls_read_buffer=options.tls_read_buffer,
                connect_timeout=options.connect_timeout,
                profile=options.profile,
                **({"delegate": options.delegate} if options.delegate is not None else {}),
                **({"attach": options.attach} if options.attach is not None else {}),
            )
        protocol = connector.protocol(
            tools,
            replace(options.protocol_options(), max_frame_bytes=policy.max_frame_bytes),
            observed=bool(observers),
        )
        if options.record is not None:
            codec = protocol.recording_codec()
            if codec is None:
                raise UsageError(
                    f"recording (SessionOptions.record) takes Gemini Live and GPT-Live "
                    f"sessions, not {protocol.wire_name} yet"
                )
            connector = RecordingConnector.to_file(connector, options, codec, observers)
        store = StoreConnector.attach(
            connector, args.get("store"), args.get("conversation"), observers
        )
        self.options = options
        self._protocol = protocol
        self._store = store
        self._connector = store or connector
        self._policy = policy
        self._observers = tuple(observers)
        self._clock = args.get("clock", time.monotonic)
        self._dispatcher: Dispatcher | None = None
        self._events = EventBuffer(
            options.event_capacity, settled_capacity=options.settled_capacity
        )
        self._wake = Wakeup()
        #: Reads are proven on this connection: the writer pings behind each message of answers.
        self._proves = False
        self._pong: asyncio.Future[Any] | None = None  # the proof in flight (one at a time)
        self._ping_owed = False  # answers left while it was: a new ping once it comes back
        #: The transport's send with the ping in the same write (``ProvesReads.send_proven``).
        self._send_proven: _SendProven | None = None
        self._switching = False  # a goAway switch-over waits for the calls and a handle
        self._idle: anyio.Event | None = None  # set by the writer once no call is live
        self._transport: Transport | None = None
        self._tg: TaskGroup | None = None
        self._accepting = True
        self._leaving = False  # the app is leaving: a connection end is no longer news
        self._closed: Closed | None = None
        self._ending = False  # _end is settling the last calls
        self._batches = 0  # dispatcher batches still running
        self._writing = False  # a send is in progress (the writer's or send_audio's own)
        self._waiting_for_room = 0  # app tasks waiting in _enqueue for a full outbox
        self._leave: Callable[[], None] = _not_connected
        self._block: CancelScope | None = None  # the app's ``async with`` block, while it runs
        self._cut_short: Closed | None = None  # the end that interrupted the block

    # -- connection management ---------------------------------------------------------------

    async def _supervise(
        self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Hold the session's own tasks in a task group of their own: ending the session
        cancels them, never the app's block beside them."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            if self._store is not None:  # the lease, then the stored handle
                await tg.start(self._hold, self._store)
            await tg.start(self._run)
            task_status.started()

    def _enter_block(self, block: CancelScope) -> None:
        """The app's block begins; a session that already ended interrupts it at once."""
        self._block = block
        if self._closed is not None:
            self._interrupt(self._closed)

    def _interrupt(self, closed: Closed) -> None:
        """The session ended on its own while the app's block ran: cut the block short."""
        block, self._block = self._block, None
        if block is not None:
            self._cut_short = closed
            block.cancel()

    def _ended_error(self, closed: Closed) -> SessionEndedError:
        """What the app is told of an end it did not ask for."""
        error = closed.error
        code = error.code if isinstance(error, LiveSessionError | TransportClosed) else None
        return SessionEndedError(
            f"the Live session ended: {closed.reason}", reason=closed.reason, error=error, code=code
        )

    async def _hold(
        self, store: StoreConnector, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Hold the conversation's lease. Once it is lost the session ends: ``Closed`` with
        the ``LeaseLostError`` (every call gets its fate), then ``connect`` raises it. No
        journaled handler starts and nothing is written after (the store fences them)."""
        try:
            await store.run(task_status=task_status)
        except LeaseLostError as exc:
            await self._end(Closed("the conversation was taken over", error=exc))
            raise

    async def _run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        protocol = self._protocol
        started = False
        while self._closed is None:
            try:
                async with self._connector.open(protocol.handle) as transport:
                    if self._closed is not None or self._leaving:
                        return  # the app left while this connection was being opened
                    self._transport = transport
                    self._apply(protocol.opened(transport.session_id, self._clock()))
                    self._wake.set()
                    if not started:
                        started = True
                        task_status.started()
                    ended = await self._serve(transport)
            except TransportClosed as exc:
                ended = exc
            finally:
                self._transport = None
            if self._closed is not None or self._leaving:
                return
            step = protocol.lost(ended.code, ended.reason, self._clock(), error=ended.error)
            if isinstance(step, Finish):
                if not started:
                    assert step.closed.error is not None
                    raise step.closed.error
                await self._end(step.closed)
                return
            await anyio.sleep(step.delay)

    async def _serve(self, transport: Transport) -> TransportClosed:
        """Read and write on one connection until it ends; returns how it ended."""
        ended: list[TransportClosed] = []
        async with anyio.create_task_group() as tg:

            def leave(closed: TransportClosed) -> None:
                ended.append(closed)
                tg.cancel_scope.cancel()

            def switch() -> None:
                leave(TransportClosed(1000, "switching over after goAway"))

            self._leave = switch
            self._proves = self._protocol.ledger.reads_proven = hasattr(transport, "ping_behind")
            self._send_proven = getattr(transport, "send_proven", None) if self._proves else None
            self._pong = None  # a pong of the last connection proves nothing here
            self._ping_owed = False
            tg.start_soon(self._guarded, self._write(transport), leave)
            await self._guarded(self._read(transport, tg), leave)  # in this task: one task fewer
        return ended[0]

    async def _ping_behind(self, transport: Transport) -> None:
        """Prove the server has read the answers sent: only then could the model have seen them
        (a server message alone may have crossed them in flight). The writer pings right behind
        a message of answers (in the same write where the transport can: ``send_proven``) and
        the pong is a callback, not a task: no wake-up of its own. One ping is in flight at a
        time; answers sent meanwhile are proven by the next."""
        if self._pong is not None:
            self._ping_owed = True
            return
        self._await_pong(await cast("ProvesReads", transport).ping_behind())

    def _await_pong(self, pong: asyncio.Future[Any]) -> None:
        """The ping behind the last message of answers is in flight: its pong proves them."""
        self._pong = pong
        pong.add_done_callback(partial(self._ponged, self._protocol.ledger.sends))

    def _ponged(self, number: int, pong: asyncio.Future[Any]) -> None:
        if not pong.cancelled():
            pong.exception()  # retrieved: a connection that ended says so to the reader
        if pong is not self._pong:
            return  # a ping of an earlier connection
        self._pong = None
        if pong.cancelled() or pong.exception() is not None:
            return
        self._protocol.ledger.read_through(number)
        if self._ping_owed:
            self._wake.set()  # the writer pings again

    async def _guarded(
        self, work: Coroutine[Any, Any, None], leave: Callable[[TransportClosed], None]
    ) -> None:
        try:
            await work
        except TransportClosed as exc:
            leave(exc)
        except OSError as exc:
            leave(TransportClosed(None, f"network error: {exc}"))

    async def _switch_when_ready(self, deadline: float) -> None:
        """After ``goAway``: leave once every call is answered and covered by a handle.

        At the deadline it leaves anyway; calls the newest handle does not know are orphaned.
        """
        self._switching = True  # new handles wake this task
        try:
            with anyio.move_on_after(max(0.0, deadline - self._clock())):
                while not self._protocol.switch_ready:
                    await self._wake.wait()
        finally:
            self._switching = False
        self._leave()

    async def _end(self, closed: Closed) -> None:
        """The session is over: settle every call, deliver ``Closed``, stop every task."""
        if self._closed is not None:
            return
        self._closed = closed
        self._accepting = False
        self._ending = True
        self._interrupt(closed)  # before the app could read ``Closed`` in its block
        self._apply(self._protocol.close(closed, self._clock()))
        self._events.close()
        if self._batches:  # let cancelled handlers unwind so their ends are counted
            with anyio.move_on_after(CANCEL_FLUSH_SECONDS):
                while self._batches:
                    await self._wake.wait()
        if self._dispatcher is not None:  # handlers that ignored their cancellation
            await self._dispatcher.aclose(0.0)
        self._ending = False
        self._wake.set()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    # -- reading and writing -----------------------------------------------------------------

    async def _read(self, transport: Transport, connection: TaskGroup) -> None:
        protocol = self._protocol
        while True:
            try:
                message = await transport.recv()
            except MalformedMessageError as exc:
                log.warning("skipped a malformed server message: %s", exc)
                continue
            handle = protocol.handle
            try:
                out = protocol.receive(message, self._clock())
            except Exception:
                log.exception("could not handle a server message; the session goes on")
                continue
            if out:  # most messages of a turn (a handle, generation complete) have none
                self._apply(out, connection)
            if protocol.handle != handle:
                if self._switching:  # a new handle may let the switch-over go
                    self._wake.set()
                if self._store is not None and protocol.handle is not None:
                    self._store.new_handle(protocol.handle)

    async def _write(self, transport: Transport) -> None:
        protocol = self._protocol
        while True:
            if self._ping_owed and self._pong is None:
                self._ping_owed = False
                await self._ping_behind(transport)
            item = protocol.next_item(self._clock())
            if item is None:
                if protocol.ledger.waiting:  # fates decided since the last look (``drain``)
                    self._apply(protocol.take_fates())
                if protocol.idle:
                    self._set_idle()
                self._wake.clear()  # next_item() just looked: wait for news after this
                await self._wake.wait()
                continue
            # Answers are proven by a ping: in the same write where the transport can.
            proven = self._proves and isinstance(item, Outgoing)
            pong = None
            self._writing = True
            try:
                if proven and self._send_proven is not None and self._pong is None:
                    pong = await self._send_proven(protocol.frame(item))
                else:
                    await transport.send(protocol.frame(item))
            except TransportClosed:
                protocol.unsent(item)
                raise
            finally:
                self._writing = False
            self._apply(protocol.sent(item, self._clock()))
            if pong is not None:
                self._await_pong(pong)
            elif proven:
                await self._ping_behind(transport)
            if self._waiting_for_room and not protocol.outbox.full:
                self._wake.set()

    # -- plumbing ----------------------------------------------------------------------------

    def _apply(self, outputs: list[Output], connection: TaskGroup | None = None) -> None:
        """Deliver the protocol's events and carry out its actions."""
        if not outputs:
            return
        # What is not an action is an event: each run of events between actions is queued at
        # once, before the action after it (which may settle calls and queue their ends).
        put_all: Callable[[Sequence[Any]], None] = self._events.put_all
        first = 0  # the first output not queued or carried out yet
        # Anything but media, calls started and their events: the writer and watchers may have
        # work. A call started gives the writer none until it settles (``_on_settled`` wakes
        # it then); waking it anyway costs a pass of the loop on a turn's critical path.
        changed = False
        for index, output in enumerate(outputs):
            kind = type(output)  # exact types: a set look-up is cheaper than isinstance
            if kind not in _ACTION_KINDS:
                if kind not in _QUIET:
                    changed = True
                    if self._observers and isinstance(output, _VIEWED):
                        record = record_of(output, self._protocol.session_id)
                        if record is not None:
                            emit(self._observers, record)
                continue
            if first < index:
                put_all(outputs[first:index])
            first = index + 1
            if kind is not RunCalls:
                changed = True
            action: Any = output  # one of ``_ACTION_KINDS`` (no ``cast`` call per output)
            match action:
                case RunCalls(calls=calls, turn=turn, refuse=refuse, partials=partials):
                    assert self._tg is not None
                    dispatcher = self._dispatcher or self._new_dispatcher()
                    rest = dispatcher.start(
                        calls,
                        turn=turn,
                        on_settled=self._on_settled,
                        on_partial=self._on_partial if partials else None,
                        refuse=refuse,
                        confirmed=action.confirmed,
                    )
                    if not isinstance(rest, list):  # some call is still running
                        self._batches += 1
                        self._tg.start_soon(self._run_batch, rest)
                case CancelCalls(call_ids=ids):
                    self._cancel(ids)
                case ConfirmCalls(call_ids=ids, withdrawn=withdrawn):
                    if self._dispatcher is not None:
                        self._dispatcher.confirm(ids, withdrawn)
                case Notify(event=event):
                    emit(self._observers, event)
                case SwitchConnection(deadline=deadline):
                    assert connection is not None
                    connection.start_soon(self._switch_when_ready, deadline)
                case _:
                    assert_never(action)
        if not first:  # no action: every output is an event
            put_all(outputs)
        elif first < len(outputs):
            put_all(outputs[first:])
        if changed or self._protocol.ledger.answers_ready:  # calls may have settled at once
            self._wake.set()

    def _new_dispatcher(self) -> Dispatcher:
        """Created with the first calls: a session that never gets one never pays for it."""
        protocol = self._protocol
        self._dispatcher = Dispatcher(
            protocol.tools,  # as the model's profile adapted them
            policy=self._policy,
            observers=self._observers,
            session_id=protocol.session_id,
            answer_seen=protocol.ledger.answer_seen,  # the ledger's own: one call fewer a call
            journal=self._store.journal if self._store else None,
        )
        return self._dispatcher

    async def _run_batch(self, rest: Coroutine[Any, Any, list[Outcome]]) -> None:
        try:
            await rest
        finally:
            self._batches -= 1
            if self._ending:  # only ``_end`` waits for batches (answers wake the writer)
                self._wake.set()

    def _on_settled(self, outcome: Outcome) -> None:
        protocol = self._protocol
        outputs = protocol.settled(outcome)
        if outputs:  # mostly none: an answered call's event comes when its answer is sent
            self._apply(outputs)
        if protocol.ledger.answers_ready:  # else its batch still runs: nothing to send yet
            self._wake.set()

    def _on_partial(self, item: Partial) -> None:
        self._apply(self._protocol.partial(item))
        self._wake.set()

    def _cancel(self, call_ids: Iterable[str]) -> None:
        if self._dispatcher is not None:
            for call_id in call_ids:
                self._dispatcher.cancel(call_id)

    async def _enqueue(self, item: ClientItem) -> None:
        """Queue app input; waits while the outbox is full (the writer is behind)."""
        outbox = self._protocol.outbox
        while self._accepting and outbox.full:
            self._waiting_for_room += 1
            try:
                await self._wake.wait()
            finally:
                self._waiting_for_room -= 1
        if not self._accepting:
            if self._cut_short is not None:
                raise self._ended_error(self._cut_short) from self._cut_short.error
            raise SessionClosedError(
                "this session is closing or closed; open a new LiveSession to keep talking"
            )
        outbox.push(item)
        self._wake.set()

    def _set_idle(self) -> None:
        if self._idle is not None:
            self._idle.set()
            self._idle = None

    async def _settle_arrivals(self) -> None:
        """Before the close frame: calls the socket has already taken in reach the reader (a
        few scheduler turns) and are answered, so none is left open by a close we chose."""
        for _ in range(_ARRIVAL_TURNS):
            await anyio.lowlevel.checkpoint()
            await self._wait_idle()

    async def _wait_idle(self) -> None:
        while not self._protocol.idle:
            idle = self._idle = anyio.Event()
            self._wake.set()
            await idle.wait()

    @property
    def handle(self) -> str | None:
        """The newest resumption handle the service issued."""
        return self._protocol.handle

    @property
    def input_rate(self) -> int:
        """The rate ``send_audio`` takes by default: 16 kHz on Gemini, 24 kHz on OpenAI (8 kHz
        for ``audio/pcmu``)."""
        return self._protocol.input_rate(None)

    @property
    def input_encoding(self) -> Literal["pcm16", "pcmu"]:
        """What ``send_audio`` takes: 16-bit PCM, or G.711 μ-law on an OpenAI session
        configured for ``audio/pcmu``."""
        return self._protocol.input_encoding

    @property
    def session_id(self) -> str | None:
        return self._protocol.session_id

    # -- lifecycle ---------------------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def connect(
        cls, client: Any = None, **args: Unpack[SessionArgs]
    ) -> AsyncIterator[LiveSession]:
        """Open a session; leaving the block shuts it down (see ``aclose``). The keyword
        arguments are ``SessionArgs``' fields, each documented there.

        :param client: a ``google.genai.Client`` (Gemini Live, Developer API or Vertex AI) or an
            ``openai.AsyncOpenAI`` (OpenAI Realtime): the vendor follows from its type.
        :raises ModelCapabilityError: a tool the model cannot run as declared (before any
            socket opens).
        :raises LiveSessionError: the first connection failed (wrong model, bad key,
            unreachable service, ``ConnectTimeoutError``); the subclass and its message say
            what to do.
        :raises SessionEndedError: the session ended on its own (the service closed it, the
            connection was lost for good, the handle expired) while the block still ran: the
            block was interrupted at its pending await. Leaving the block normally, an
            exception of the block's own, ``aclose()`` and a cancellation from outside are
            left as they are.
        :raises LeaseLostError: another worker took the conversation over (``store``).
        :raises MCPError: an MCP server of ``tools`` could not start or list its tools (before
            any socket opens).
        """
        tools = args.get("tools")
        if isinstance(tools, ToolRegistry):  # its MCP servers' tools are listed first
            async with tools.connect_mcp(), cls._open(client, **args) as session:
                yield session
        else:
            async with cls._open(client, **args) as session:
                yield session

    @classmethod
    @asynccontextmanager
    async def _open(
        cls, client: Any = None, **args: Unpack[SessionArgs]
    ) -> AsyncIterator[LiveSession]:
        session = cls(client, **args)
        # A shared limiter runs while sessions use it (no exit stack: its deque is 760 bytes).
        in_use = getattr(session._policy.limiter, "in_use", None)
        using = in_use() if in_use is not None else nullcontext()
        try:
            async with using, anyio.create_task_group() as tg:
                await tg.start(session._supervise)
                try:
                    with anyio.CancelScope() as block:  # what an end on its own interrupts
                        session._enter_block(block)
                        yield session
                finally:
                    session._block = None  # the block is over: an end from now on is no news
                    with anyio.CancelScope(shield=True):
                        await session.aclose()
                    tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            raise _sole(group) from None
        finally:
            if isinstance(session._connector, RecordingConnector):
                session._connector.writer.close()
        if session._cut_short is not None:
            raise session._ended_error(session._cut_short) from session._cut_short.error

    async def aclose(self) -> None:
        """Stop input, give running calls ``shutdown_grace`` seconds, send what can be sent, close.

        Calls still running after the grace period are cancelled; while the socket is open their
        cancellation is sent as an error answer, and whatever cannot be sent ends ``orphaned``.
        The websocket is closed normally (1000). Closing twice is harmless.
        """
        self._block = None  # the app asked: its block is not interrupted
        if not self._accepting:
            while self._ending:  # the session is ending on its own: let it finish
                await self._wake.wait()
            return
        self._accepting = False
        self._protocol.shutdown()
        with anyio.move_on_after(self.options.shutdown_grace):
            await self._wait_idle()
        late = self._protocol.shutdown()
        if late and self._dispatcher is not None:
            self._cancel(late)
            with anyio.move_on_after(CANCEL_FLUSH_SECONDS):
                await self._wait_idle()
        self._leaving = True
        transport = self._transport
        if transport is not None and self._closed is None:
            with anyio.move_on_after(CANCEL_FLUSH_SECONDS):  # answer what arrived meanwhile
                await self._settle_arrivals()
            await transport.close()
        await self._end(Closed("closed by the app"))

    # -- app-facing API ----------------------------------------------------------------------

    async def send_text(self, text: str) -> None:
        """Send a user text turn (Gemini ``realtimeInput.text``; OpenAI a user message and
        ``response.create``)."""
        await self._enqueue(Text(text))

    async def send_audio(self, pcm16: bytes, rate: int | None = None) -> None:
        """Send microphone audio: 16-bit little-endian mono PCM at ``rate`` Hz (μ-law bytes
        when ``input_encoding`` is ``pcmu``).

        ``None`` is the vendor's rate: 16 kHz for Gemini (which takes any rate), 24 kHz for
        OpenAI (which takes only that one: another raises ``ValueError``; resample first).

        When nothing else is queued and no call is pending, the frame goes straight onto the
        socket from the caller's task (waiting only if the socket is backed up); otherwise it
        is queued behind what came first and the ``audio_during_blocking`` policy applies.
        """
        if len(pcm16) % 2 and self._protocol.input_encoding == "pcm16":
            raise ValueError("16-bit PCM must have an even number of bytes")
        audio = Audio(bytes(pcm16), self._protocol.input_rate(rate))
        transport = self._transport
        if transport is None or self._writing or not self._accepting:
            await self._enqueue(audio)
            return
        if not self._protocol.send_directly:
            await self._enqueue(audio)
            return
        self._writing = True
        try:
            await transport.send(audio)
        except TransportClosed:  # the connection manager reconnects; the frame goes then
            self._protocol.outbox.push_front(audio)
            self._wake.set()
            return
        finally:
            self._writing = False
        if self._observers:
            self._apply(self._protocol.sent(audio, self._clock()))

    async def truncate_audio(self, played: float) -> None:
        """After a barge-in: the user heard only ``played`` seconds of the model's latest
        audio. On OpenAI Realtime the assistant item is truncated there
        (``conversation.item.truncate``), so the model does not believe it said what was never
        heard; Gemini cuts an interrupted turn itself, and nothing is sent."""
        item = self._protocol.truncate(played)
        if item is not None:
            await self._enqueue(item)

    async def send_activity_start(self) -> None:
        """Mark the start of user speech (when automatic activity detection is off)."""
        await self._enqueue(Signal("activity_start"))

    async def send_activity_end(self) -> None:
        """Mark the end of user speech (when automatic activity detection is off)."""
        await self._enqueue(Signal("activity_end"))

    async def send_audio_stream_end(self) -> None:
        """Tell the service the microphone stopped (flushes its audio buffer)."""
        await self._enqueue(Signal("audio_stream_end"))

    def events(self) -> AsyncIterator[SessionEvent]:
        """Every event of the session in order; ends after the terminal ``Closed`` event."""
        return self._events.stream()  # one generator resumed per event, no coroutine

    async def exchange(self) -> AsyncIterator[SessionEvent]:
        """The events of one exchange: what the model says and does about the last input, its
        late NON_BLOCKING answers and the model's reply to them included. Ends after the
        ``TurnComplete`` that leaves no call open and no reply due (or after ``Closed``):
        read it once per input (``livebridge.live.exchange`` has the rules)."""
        tracker = ExchangeTracker(self.tools)
        while (event := await self._events.get()) is not None:
            yield event
            if tracker.feed(event):
                return

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
        return self._protocol.outbox.audio_dropped


_SendProven = Callable[[ClientItem], Coroutine[Any, Any, "asyncio.Future[Any]"]]


def _check_arguments(args: Mapping[str, object]) -> None:
    """A misspelt or missing argument is a ``TypeError`` naming it, as for any signature:
    ``**args`` alone would ignore a typo. (``__required_keys__`` cannot tell under postponed
    annotations on Python 3.11, so the one required key is named here.)"""
    unknown = sorted(args.keys() - SessionArgs.__annotations__.keys())
    if unknown:
        raise TypeError(f"LiveSession got an unexpected keyword argument {unknown[0]!r}")
    if "tools" not in args:
        raise TypeError("LiveSession is missing the keyword argument 'tools'")


def _sole(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one exception inside nested single-member groups, else the group itself."""
    inner: BaseException = group
    while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
        inner = inner.exceptions[0]
    return inner


def _not_connected() -> None:
    raise RuntimeError("no connection is open")
