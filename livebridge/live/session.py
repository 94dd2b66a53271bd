"""``LiveSession``: the app's handle on one Live conversation and its tool calls.

Decisions live elsewhere: what a message means and what to do about it (``protocol``), which
answers go out and when (``ledger``), how calls run (``dispatch``), how a connection is opened
(``connectors``), the tasks that carry it all out (``actor``). This module is what the app
calls: connect, send input, read events, leave.

Handlers outlive connections: a call keeps running across a reconnect and its answer goes to the
new connection if the resumed session knows the call, and is dropped (``orphaned``) if not. When
the session ends for any reason, every call without a fate is orphaned and its handler cancelled.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from typing import Any, Literal, Required, TypedDict, Unpack

import anyio

from livebridge.calls.observers import Observer
from livebridge.calls.policy import CallPolicy
from livebridge.calls.tools import ToolRegistry
from livebridge.errors import TransportClosed, UsageError
from livebridge.live.actor import CANCEL_FLUSH_SECONDS, SessionActor
from livebridge.live.exchange import ExchangeTracker
from livebridge.live.options import SessionOptions
from livebridge.live.vendors import connector_for
from livebridge.protocol.base import Connector
from livebridge.protocol.events import Closed, SessionEvent
from livebridge.protocol.transport import Audio, Signal, Text
from livebridge.recording.record import RecordingConnector
from livebridge.store import Store, StoreConnector

__all__ = ["LiveSession", "SessionArgs"]

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


class LiveSession(SessionActor):
    """One Live conversation with its tool calls; open it with ``LiveSession.connect``."""

    __slots__ = ("tools",)

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
        super().__init__(
            protocol,
            connector,
            store,
            options=options,
            policy=policy,
            observers=observers,
            clock=args.get("clock", time.monotonic),
        )

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
        try:
            async with AsyncExitStack() as stack, anyio.create_task_group() as tg:
                in_use = getattr(session._policy.limiter, "in_use", None)
                if in_use is not None:  # a shared limiter runs while sessions use it
                    await stack.enter_async_context(in_use())
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

    async def events(self) -> AsyncIterator[SessionEvent]:
        """Every event of the session in order; ends after the terminal ``Closed`` event."""
        events = self._events
        while True:
            for event in events.ready():  # no coroutine per event while they are waiting
                yield event
            if events.closed:  # and every event was read
                return
            await events.wait()

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
