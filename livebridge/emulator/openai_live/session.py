"""One emulated GPT-Live session: the client's events in, the service's answers out.

What the real service does at the delegation step, reproduced so that a client's faults show:

- ``session.start`` first, under the strict schema (``schema``); nothing before it is answered
  but an error, and nothing goes out before ``session.started``;
- a backend response (``delegate``) comes as ``session.delegation.created`` and nested
  ``response.event`` envelopes; calls are told only in ``response.output_item.done`` and the
  completed snapshot's ``output`` is empty; several calls per response, overlapping
  delegations, ``response.failed`` / ``response.incomplete`` after zero or more calls;
- the gate is session-wide: ``response.create`` while any call is unanswered is refused with
  ``function_call_outputs_required`` (its ``client_event_id`` the create's) and never retried;
- a failed response's calls are dropped, and an output for one is refused;
- the backend's input is metered for the whole session (``LiveOptions.items``/``bytes``): the
  item that overflows is refused with ``response_input_buffer_full`` and its call stays open;
- no resumption: a new socket is a new session; ``session.close`` rejects later commands;
- a sideband (``attach``) gets a short replay of the session's recent events and then
  ``session.started``, and from then on every server event the primary gets; its commands
  enter the same session, except ``session.start`` and input audio, which it may not send.

Each fault a client makes is kept in ``verdicts`` under the peer-bug name of ``GPT_LIVE.md``
§7 it reproduces: ``T1`` an early continuation, ``T2`` a second continuation with no output
since the last, ``T4`` an output for a dropped call, ``T5`` a continuation while a response
still runs, ``T6`` an output over the budget, ``T7`` a call open past
``LiveOptions.watchdog`` seconds with no output, ``T8`` a field the schema refuses, ``T10`` an
unknown client event, ``T11`` a second output for one call, ``T12`` an output for a call the
session never had, ``T13`` a command after ``session.close``. A refusal is the client's fault
only when it had provably read what makes it one (with ``LiveOptions.proof``: an output for a
call shows it read every event before that call); one that crossed news on the wire counts in
``races`` instead.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import itertools
import json
from collections import deque
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from livebridge.emulator.base import FRAME_SECONDS, frame_count, pace
from livebridge.emulator.openai_live import schema
from livebridge.emulator.shared import Shared
from livebridge.emulator.voice import VoiceActivity, tone

_ids = itertools.count(1)
#: The longest append accepted: 500 tokens as the service estimates them (1,756 characters
#: were seen accepted, 1,900 refused).
MAX_APPEND_CHARS = 1_850
#: Server events kept for the short replay a sideband gets on attach.
REPLAY_EVENTS: Final = 256
#: The connection whose command is being handled: its errors go to it alone.
_origin: ContextVar[ServerConnection | None] = ContextVar("_origin", default=None)


def new_id(prefix: str) -> str:
    return f"{prefix}_{next(_ids):06d}"


@dataclass(frozen=True, slots=True)
class LiveOptions:
    """How the emulated service behaves where the sources leave it open (``GPT_LIVE.md`` §8).

    ``items``/``bytes``: the backend's input for the whole session. ``dropped_code``: the error
    for an output sent to a call a failed response dropped. ``duplicate``: what a second output
    for one call gets (``"error"``, ``"ignore"`` or ``"accept"``). ``proof`` (the default):
    name a refusal as the client's fault only when it provably read what makes it one (see the
    module docstring), since a client message may cross the server's news on the wire;
    ``proof=False`` names every refusal a verdict (for a raw client that surely read the news).
    ``watchdog``: seconds a call may stay open with no output before it is the verdict ``T7``
    (a result that never reached the wire); None: no watchdog.
    """

    items: int = 128
    bytes: int = 32_768
    dropped_code: str = "function_call_not_found"
    duplicate: str = "error"
    proof: bool = True
    watchdog: float | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    """A peer fault the client made: its ``GPT_LIVE.md`` §7 name and what happened."""

    case: str
    detail: str


@dataclass(slots=True)
class Backend:
    """The delegated Responses backend's state for one session."""

    running: dict[str, str | None] = field(default_factory=dict)  # response -> delegation
    open: dict[str, str] = field(default_factory=dict)  # call id -> response id
    answered: dict[str, str] = field(default_factory=dict)  # call id -> output
    dropped: set[str] = field(default_factory=set)
    used_items: int = 0
    used_bytes: int = 0
    queued_text: list[str] = field(default_factory=list)
    fresh: bool = False  # an output or text came since the last response.create
    told: dict[str, int] = field(default_factory=dict)  # call id -> when it was announced
    dropped_at: dict[str, int] = field(default_factory=dict)  # call id -> when it was dropped
    started_at: dict[str, int] = field(default_factory=dict)  # response id -> when it was told
    read_through: int = 0  # the client provably read the events up to here
    races: int = 0  # refusals of what crossed events the client had not read yet
    creates: int = 0  # response.create accepted
    refusals: int = 0  # response.create refused


class LiveServerSession:
    """The server side of one accepted GPT-Live websocket."""

    def __init__(
        self,
        shared: Shared,
        ws: ServerConnection,
        number: int,
        *,
        model: str,
        options: LiveOptions,
    ) -> None:
        self.shared = shared
        self.ws = ws
        self.id = f"live_{number:06d}"
        self.model = model
        self.options = options
        self.session: dict[str, Any] | None = None
        self.backend = Backend()
        self.verdicts: list[Verdict] = []
        self.errors: list[str] = []
        self.received: list[dict[str, Any]] = []
        self.closing = False
        self.finished = False
        self.audio_ms = 0.0
        #: Utterances heard in the input audio (speech, then half a second of silence).
        self.utterances = 0
        self._ear = VoiceActivity()
        #: Calls the next continuation makes (each a list of (name, arguments)); empty: it
        #: answers in text.
        self.next_calls: list[list[tuple[str, dict[str, Any]]]] = []
        #: What a continuation calls when ``next_calls`` says nothing: the calls the user's
        #: queued text asks for (the default model's rules), or None.
        self.planner: Callable[[str], list[tuple[str, dict[str, Any]]]] | None = None
        #: Client delegations sent, with the text of the appends that answered each.
        self.client_delegations: dict[str, list[str]] = {}
        #: A replay (``openai_live.replay``) plays the backend's responses: a
        #: ``response.create`` the gate accepts starts none of the session's own.
        self.replaying = False
        self._cond = asyncio.Condition()
        self._send_lock = asyncio.Lock()
        self._last_delegation: str | None = None
        self._told = 0  # server events sent so far (what the client may have read)
        #: Sideband connections attached now, and the client events each sent.
        self.attached: list[ServerConnection] = []
        self.sideband_received: list[dict[str, Any]] = []
        self._history: deque[dict[str, Any]] = deque(maxlen=REPLAY_EVENTS)

    # -- state ---------------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        return self.session is not None

    @property
    def open_calls(self) -> list[str]:
        return list(self.backend.open)

    def verdict(self, case: str, detail: str) -> None:
        self.verdicts.append(Verdict(case, detail))
        self.shared.notify()

    async def changed(self) -> None:
        async with self._cond:
            self._cond.notify_all()
        self.shared.notify()

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 10) -> None:  # noqa: ASYNC109
        async with asyncio.timeout(timeout), self._cond:
            await self._cond.wait_for(predicate)

    # -- sending ---------------------------------------------------------------------------------

    async def send(self, event: dict[str, Any], *, to: ServerConnection | None = None) -> None:
        """``event`` to the primary and every attached sideband, or to ``to`` alone."""
        audio = event.get("type") == "session.output_audio.delta"
        if not audio:
            event = {"event_id": new_id("evt"), **event}
        async with self._send_lock:
            self.shared.record("server", self.id, event)
            data = json.dumps(event)
            if to is not None and to is not self.ws:
                with contextlib.suppress(ConnectionClosed):
                    await to.send(data)
                return
            await self.ws.send(data)
            if to is not None:
                return
            if not audio and event.get("type") != "session.started":
                self._history.append(event)
            for sideband in list(self.attached):
                with contextlib.suppress(ConnectionClosed):
                    if not audio:
                        await sideband.send(data)
                    elif (reflected := self._reflected(event)) is not None:
                        await sideband.send(reflected)

    def _reflected(self, event: dict[str, Any]) -> str | None:
        """Output audio as a sideband gets it: PCM16 at 24 kHz with its place on the
        timeline (a session in another format is not reflected here)."""
        fmt = (self.session or {}).get("audio", {}).get("format", {})
        if fmt.get("type") != "audio/pcm" or fmt.get("rate") != 24000:
            return None
        at = int(self.audio_ms)
        return json.dumps({**event, "start_ms": at, "end_ms": at})

    async def error(
        self, code: str, message: str, event_id: str | None, param: str | None = None
    ) -> None:
        detail: dict[str, Any] = {"type": "invalid_request_error", "code": code, "message": message}
        if param is not None:
            detail["param"] = param
        event: dict[str, Any] = {"type": "error", "error": detail}
        if event_id is not None:
            detail["client_event_id"] = event_id
            event["client_event_id"] = event_id
        await self.send(event, to=_origin.get())

    async def nested(self, delegation: str | None, event: dict[str, Any]) -> None:
        self._told += 1
        await self.send({"type": "response.event", "delegation_id": delegation, "event": event})

    def abort(self) -> None:
        """Drop the socket without a close frame (a lost connection)."""
        self.shared.record("server", self.id, {"close": {"code": 1006, "reason": "aborted"}})
        self.ws.transport.abort()

    # -- the backend, as a scenario drives it ------------------------------------------------

    async def delegate(
        self,
        calls: list[tuple[str, dict[str, Any]]],
        *,
        delegation: str | None = None,
        end: str | None = "completed",
        text: str = "",
    ) -> tuple[str, str, list[str]]:
        """One backend response with ``calls`` (in parallel), under a new delegation unless
        ``delegation`` names one; ``end``: its terminal event (``completed``, ``failed``,
        ``incomplete``, or None to leave it running). Returns (delegation, response, call ids)."""
        if delegation is None:
            delegation = new_id("item")
            self._last_delegation = delegation
            await self.send(
                {
                    "type": "session.delegation.created",
                    "offset_ms": int(self.audio_ms),
                    "delegation": {
                        "id": delegation,
                        "type": "delegation",
                        "target": "responses",
                        "response_id": None,
                    },
                }
            )
        response_id = await self._respond(delegation, calls, text)
        call_ids = [c for c, r in self.backend.open.items() if r == response_id]
        if end is not None:
            await self.end(response_id, end)
        return delegation, response_id, call_ids

    async def _respond(
        self, delegation: str | None, calls: list[tuple[str, dict[str, Any]]], text: str
    ) -> str:
        response_id = new_id("resp")
        self.start_response(response_id, delegation)
        snapshot = _snapshot(response_id, "in_progress")
        await self.nested(delegation, {"type": "response.created", "response": snapshot})
        await self.nested(delegation, {"type": "response.in_progress", "response": snapshot})
        reasoning = {"id": new_id("rs"), "type": "reasoning", "summary": []}
        await self.nested(
            delegation, {"type": "response.output_item.done", "output_index": 0, "item": reasoning}
        )
        for index, (name, arguments) in enumerate(calls, start=1):
            call_id = new_id("call")
            item = {
                "id": new_id("fc"),
                "type": "function_call",
                "status": "in_progress",
                "call_id": call_id,
                "name": name,
                "arguments": "",
            }
            added = {"type": "response.output_item.added", "output_index": index, "item": item}
            await self.nested(delegation, added)
            done_item = {**item, "status": "completed", "arguments": json.dumps(arguments)}
            self.open_call(call_id, response_id)
            done = {"type": "response.output_item.done", "output_index": index, "item": done_item}
            await self.nested(delegation, done)
        if text:
            await self.nested(delegation, {"type": "response.output_text.delta", "delta": text})
            await self.send({"type": "session.output_transcript.delta", "delta": text})
        await self.changed()
        return response_id

    def start_response(self, response_id: str, delegation: str | None) -> None:
        """``response_id`` runs under ``delegation``, told by the next nested event."""
        self.backend.running[response_id] = delegation
        self.backend.started_at[response_id] = self._told + 1

    def open_call(self, call_id: str, response_id: str) -> None:
        """``call_id`` of ``response_id`` is told by the next nested event: open until an
        output answers it (the watchdog, if any, starts now)."""
        self.backend.open[call_id] = response_id
        self.backend.told[call_id] = self._told + 1
        if self.options.watchdog is not None:
            loop = asyncio.get_running_loop()
            loop.call_later(self.options.watchdog, self._watch, call_id)

    def drop_calls_of(self, response_id: str) -> None:
        """A failed or incomplete response drops its open calls (told by the next event)."""
        for call_id in [c for c, r in self.backend.open.items() if r == response_id]:
            del self.backend.open[call_id]
            self.backend.dropped.add(call_id)
            self.backend.dropped_at[call_id] = self._told + 1

    def _watch(self, call_id: str) -> None:
        """The watchdog's time for ``call_id`` is up: still open with no output is T7."""
        if call_id in self.backend.open and not self.finished and not self.closing:
            self.verdict("T7", f"call {call_id} open {self.options.watchdog:g} s with no output")

    async def end(self, response_id: str, status: str = "completed") -> None:
        """End a running backend response; a failed or incomplete one drops its open calls."""
        delegation = self.backend.running.pop(response_id, None)
        snapshot = _snapshot(response_id, status)
        if status == "failed":
            snapshot["error"] = {"code": "server_error", "message": "The backend failed."}
        elif status == "incomplete":
            snapshot["incomplete_details"] = {"reason": "max_output_tokens"}
        else:
            snapshot["usage"] = {"input_tokens": 40, "output_tokens": 12, "total_tokens": 52}
        if status != "completed":
            self.drop_calls_of(response_id)
        await self.nested(delegation, {"type": f"response.{status}", "response": snapshot})
        await self.changed()

    async def speak(self, seconds: float, quiet: float = 0.6) -> None:
        """The voice model says something: ``seconds`` of a tone on the output track, in the
        session's format at real-time pace, then ``quiet`` seconds of the digital silence the
        track carries between replies (no event marks a reply's end)."""
        fmt = (self.session or {}).get("audio", {}).get("format", {})
        pcm = tone(FRAME_SECONDS, 8000 if fmt.get("type") == "audio/pcmu" else 24_000)
        if fmt.get("type") == "audio/pcmu":
            from livebridge.phone.audio import pcm16_to_ulaw

            voice, silence = pcm16_to_ulaw(pcm), b"\xff" * (len(pcm) // 2)
        else:
            voice, silence = pcm, bytes(len(pcm))
        frames = [voice] * frame_count(seconds) + [silence] * frame_count(quiet)
        start = asyncio.get_running_loop().time()
        for index, frame in enumerate(frames):
            if self.finished or self.closing:
                return
            delta = base64.b64encode(frame).decode()
            await self.send({"type": "session.output_audio.delta", "delta": delta})
            await pace(start, index)

    # -- client events ---------------------------------------------------------------------------

    async def serve(self, scenario: LiveScenario | None) -> None:
        """Read client events until the socket closes; the scenario plays the model alongside."""
        task = asyncio.ensure_future(scenario(self)) if scenario is not None else None
        if task is not None:
            task.add_done_callback(self._scenario_ended)
        _origin.set(self.ws)
        try:
            async for frame in self.ws:
                await self.handle(frame)
        except ConnectionClosed:
            pass
        except Exception as error:  # the service's internal error: reported, and 1011
            self.errors.append(f"{type(error).__name__}: {error}")
            await self.ws.close(1011, "Internal error occurred.")
        finally:
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            self.finished = True
            if not self.closing and self.attached:  # the primary was lost: the session ends
                await self._tell_sidebands("connection_lost")
            await self.changed()

    async def attach(self, ws: ServerConnection) -> None:
        """A sideband: the short replay of recent events, then ``session.started``, then
        every server event as the primary gets it; its commands act on this session."""
        async with self._send_lock:
            for event in self._history:
                await ws.send(json.dumps(event))
            started = {"type": "session.started", "event_id": new_id("evt")}
            await ws.send(json.dumps({**started, "session": self.session}))
            self.attached.append(ws)
        _origin.set(ws)
        await self.changed()
        try:
            async for frame in ws:
                await self.handle(frame, sideband=True)
        except ConnectionClosed:
            pass
        finally:
            if ws in self.attached:
                self.attached.remove(ws)
            await self.changed()

    async def _tell_sidebands(self, reason: str) -> None:
        """The session ended: each sideband hears ``session.closed``, then a close frame
        without a status (code 1005, as a sideband was seen to get)."""
        closed = {"type": "session.closed", "event_id": new_id("evt"), "reason": reason}
        event = json.dumps({**closed, "session": self.session})
        for sideband in list(self.attached):
            with contextlib.suppress(ConnectionClosed):
                await sideband.send(event)
        await self._close_sidebands()

    async def _close_sidebands(self) -> None:
        for sideband in list(self.attached):
            with contextlib.suppress(ConnectionClosed):
                async with sideband.send_context():
                    sideband.protocol.send_close()

    def _scenario_ended(self, task: asyncio.Future[None]) -> None:
        """A scenario that failed is the test's error: kept in ``errors``."""
        if not task.cancelled() and task.exception() is not None:
            error = task.exception()
            self.errors.append(f"scenario: {type(error).__name__}: {error}")
            self.shared.notify()

    async def handle(self, frame: str | bytes, *, sideband: bool = False) -> None:
        try:
            event = json.loads(frame)
        except ValueError:
            await self.error("invalid_json", "The message is not valid JSON.", None)
            return
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            await self.error("invalid_request_error", "Every event needs a string 'type'.", None)
            return
        self.received.append(event)
        if sideband:
            self.sideband_received.append(event)
        self.shared.record("client", self.id, event)
        kind = event["type"]
        event_id = event.get("event_id") if isinstance(event.get("event_id"), str) else None
        events = schema.SIDEBAND_EVENTS if sideband else schema.CLIENT_EVENTS
        if kind not in events:
            if kind not in schema.CLIENT_EVENTS:
                self.verdict("T10", f"unknown client event {kind!r}")
            supported = ", ".join(f"'{name}'" for name in events)
            await self.error(
                "invalid_value",
                f"Invalid value: '{kind}'. Supported values are: {supported}.",
                event_id,
                "type",
            )
            return
        if self.closing:
            self.verdict("T13", f"{kind} after session.close")
            await self.error("session_closing", "The session is closing.", event_id)
            return
        if kind == "session.start":
            await self._on_start(event, event_id)
        elif self.session is None:
            await self.error(
                "session_not_started",
                "Send session.start first and wait for session.started.",
                event_id,
            )
        elif kind == "session.input_audio.append":
            await self._on_audio(event, event_id)
        elif kind == "response.item.create":
            await self._on_item(event, event_id)
        elif kind == "response.create":
            await self._on_create(event_id)
        elif kind.endswith(".append") and kind != "session.input_audio.append":
            await self._on_append(kind, event, event_id)
        elif kind == "session.close":
            await self._on_close()
        await self.changed()

    async def _on_start(self, event: dict[str, Any], event_id: str | None) -> None:
        if self.session is not None:
            await self.error(
                "session_already_started", "The session has already started.", event_id
            )
            return
        resolved = schema.resolve(event.get("session"))
        if isinstance(resolved, schema.Refusal):
            if resolved.code == "unknown_parameter":
                self.verdict("T8", f"session.start with {resolved.param}")
            await self.error(resolved.code, resolved.message, event_id, resolved.param)
            await self.ws.close(1008, f"invalid_request_error.{resolved.code}")
            return
        self.session = {"id": self.id, "expires_at": 0, **resolved}
        await self.send(
            {"type": "session.started", "client_event_id": event_id, "session": self.session}
        )

    async def _on_append(self, kind: str, event: dict[str, Any], event_id: str | None) -> None:
        """A context append: ``content`` and ``delegation_id`` required, the id a known
        client delegation (or null), the text within the service's 500 tokens."""
        content, delegation = event.get("content"), event.get("delegation_id")
        if not isinstance(content, str) or "delegation_id" not in event:
            missing = "content" if not isinstance(content, str) else "delegation_id"
            self.verdict("T8", f"{kind} without {missing}")
            await self.error(
                "missing_required_parameter",
                f"Missing required parameter: '{missing}'.",
                event_id,
                missing,
            )
            return
        if delegation is not None and delegation not in self.client_delegations:
            self.verdict("T8", f"{kind} for {delegation!r}, not a client delegation")
            await self.error(
                "invalid_value",
                f"Unknown client delegation '{delegation}'.",
                event_id,
                "delegation_id",
            )
            return
        if len(content) > MAX_APPEND_CHARS:
            await self.error(
                "invalid_value",
                "Context append text must not exceed 500 tokens.",
                event_id,
                "content",
            )
            return
        if delegation is not None:
            self.client_delegations[delegation].append(content)
        at = int(self.audio_ms)
        acknowledged = kind.removeprefix("session.").replace(".append", ".appended")
        await self.send(
            {
                "type": f"session.{acknowledged}",
                "client_event_id": event_id,
                "start_ms": at,
                "end_ms": at,
            }
        )

    async def delegate_to_client(self) -> str:
        """A client delegation: ``session.delegation.created`` (target ``client``); the
        appends that answer it collect in ``client_delegations``."""
        delegation = new_id("item")
        self.client_delegations[delegation] = []
        created = {"id": delegation, "type": "delegation", "target": "client"}
        await self.send(
            {
                "type": "session.delegation.created",
                "offset_ms": int(self.audio_ms),
                "delegation": created,
            }
        )
        await self.changed()
        return delegation

    async def _on_audio(self, event: dict[str, Any], event_id: str | None) -> None:
        try:
            audio = base64.b64decode(str(event.get("audio", "")), validate=True)
        except (binascii.Error, ValueError):
            await self.error("invalid_audio", "The audio is not valid base64.", event_id)
            return
        fmt = (self.session or {}).get("audio", {}).get("format", {})
        if fmt.get("type") == "audio/pcm":
            if len(audio) % 2:
                await self.error("invalid_audio", "PCM16 audio must hold whole samples.", event_id)
                return
            self.audio_ms += len(audio) / 2 / int(fmt.get("rate", 24000)) * 1000
            self._hear(audio, len(audio) / 2 / int(fmt.get("rate", 24000)))
        else:
            self.audio_ms += len(audio) / 8
            try:  # μ-law decodes with the phone extra's codec
                from livebridge.phone.audio import ulaw_to_pcm16
            except ImportError:
                return
            self._hear(ulaw_to_pcm16(audio), len(audio) / 8000)

    def _hear(self, pcm: bytes, seconds: float) -> None:
        """Count the utterances in the input: a scenario waits on ``utterances``."""
        if self._ear.hear(pcm, seconds, model_talking=False) == "end_of_turn":
            self._ear.end(force=False)
            self.utterances += 1

    async def _on_item(self, event: dict[str, Any], event_id: str | None) -> None:
        delegation = (self.session or {}).get("delegation", {})
        if delegation.get("type") != "responses":
            await self.error(
                "invalid_request_error",
                "response.item.create requires Responses delegation.",
                event_id,
            )
            return
        item = event.get("item")
        if not isinstance(item, dict):
            await self.error(
                "missing_required_parameter",
                "Missing required parameter: 'item'.",
                event_id,
                "item",
            )
            return
        backend = self.backend
        size = len(msgspec.json.encode(item))
        if item.get("type") == "function_call_output":
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or not isinstance(item.get("output"), str):
                await self.error(
                    "invalid_value",
                    "A function_call_output needs call_id and output strings.",
                    event_id,
                )
                return
            if call_id in backend.told:  # an output for a call shows it read up to that call
                backend.read_through = max(backend.read_through, backend.told[call_id])
            if call_id in backend.dropped:
                if not self._raced(backend.dropped_at.get(call_id, 0)):
                    self.verdict("T4", f"output for {call_id}, which a failed response dropped")
                else:  # the output crossed the failure on the wire
                    backend.races += 1
                    backend.fresh = True  # the client owes a continuation for it all the same
                await self.error(
                    self.options.dropped_code,
                    f"No open function call with call_id '{call_id}': its response failed.",
                    event_id,
                    "item.call_id",
                )
                return
            if call_id in backend.answered:
                self.verdict("T11", f"a second output for {call_id}")
                if self.options.duplicate == "error":
                    await self.error(
                        "duplicate_function_call_output",
                        f"The function call '{call_id}' already has an output.",
                        event_id,
                        "item.call_id",
                    )
                if self.options.duplicate != "accept":
                    return
            elif call_id not in backend.open:
                self.verdict("T12", f"output for {call_id}, a call this session never had")
                await self.error(
                    "invalid_value",
                    f"No function call with call_id '{call_id}' found in the session.",
                    event_id,
                    "item.call_id",
                )
                return
            if not await self._fits(size, event_id, call_id):
                return
            backend.open.pop(call_id, None)
            backend.answered[call_id] = item["output"]
            backend.fresh = True
            return
        if item.get("type") == "message":
            if not await self._fits(size, event_id, None):
                return
            parts = item.get("content") or []
            backend.queued_text += [p.get("text", "") for p in parts if isinstance(p, dict)]
            backend.fresh = True
            return
        await self.error(
            "invalid_value", f"Unsupported item type {item.get('type')!r}.", event_id, "item.type"
        )

    async def _fits(self, size: int, event_id: str | None, call_id: str | None) -> bool:
        backend, options = self.backend, self.options
        if backend.used_items + 1 > options.items or backend.used_bytes + size > options.bytes:
            self.verdict(
                "T6",
                f"an item of {size} bytes over the backend's session budget"
                + (f" (call {call_id} stays open)" if call_id else ""),
            )
            await self.error(
                "response_input_buffer_full",
                f"The response input buffer is full: at most {options.items} items and "
                f"{options.bytes} bytes per session (used {backend.used_items} items, "
                f"{backend.used_bytes} bytes; this item is {size} bytes).",
                event_id,
            )
            return False
        backend.used_items += 1
        backend.used_bytes += size
        return True

    def _raced(self, told: int) -> bool:
        """Did a refusal cross, on the wire, the event (number ``told``) that causes it?"""
        return self.options.proof and told > self.backend.read_through

    async def _on_create(self, event_id: str | None) -> None:
        backend = self.backend
        if (self.session or {}).get("delegation", {}).get("type") != "responses":
            await self.error(
                "invalid_request_error", "response.create requires Responses delegation.", event_id
            )
            return
        if backend.open:
            backend.refusals += 1
            missing = ", ".join(backend.open)
            if not self._raced(min(backend.told.get(c, 0) for c in backend.open)):
                self.verdict("T1", f"response.create while {missing} had no output")
            else:  # the create crossed new calls on the wire
                backend.races += 1
            await self.error(
                "function_call_outputs_required",
                f"Missing function call outputs for: {missing}.",
                event_id,
            )
            return
        if backend.running and not self._raced(
            min(backend.started_at.get(r, 0) for r in backend.running)
        ):  # (one that crossed a new response's start on the wire is accepted, and no fault)
            self.verdict("T5", f"response.create while {', '.join(backend.running)} still ran")
        if not backend.fresh:
            self.verdict("T2", "a second response.create with no output since the last one")
        backend.fresh = False
        backend.creates += 1
        if self.replaying:  # a replay plays the recorded continuation
            backend.queued_text.clear()
            return
        delegation = self._last_delegation
        calls: list[tuple[str, dict[str, Any]]] = []
        if self.next_calls:
            calls = self.next_calls.pop(0)
        elif self.planner is not None and backend.queued_text:
            calls = self.planner(" ".join(backend.queued_text))
        text = "" if calls else "Here is what I found."
        backend.queued_text.clear()
        response_id = await self._respond(delegation, calls, text)
        await self.end(response_id, "completed")

    async def _on_close(self) -> None:
        self.closing = True
        for call_id in list(self.backend.open):
            self.backend.dropped.add(call_id)
        usage = {"seconds": self.audio_ms / 1000}
        await self.send(
            {
                "type": "session.closed",
                "reason": "close_requested",
                "session": self.session,
                "usage": usage,
            }
        )
        await self._close_sidebands()
        await self.ws.close(1000)


def _snapshot(response_id: str, status: str) -> dict[str, Any]:
    """A reduced lifecycle snapshot: ``output`` and ``tools`` empty, ``instructions`` null."""
    return {
        "id": response_id,
        "object": "response",
        "status": status,
        "output": [],
        "tools": [],
        "instructions": None,
    }


#: What plays the model's side of each GPT-Live connection.
LiveScenario = Callable[[LiveServerSession], Awaitable[None]]
