"""``GeminiLiveProtocol``: one Gemini Live conversation as a sans-I/O state machine.

The shell (``livebridge.live.session``) feeds it what happened, with the time as an argument:
decoded server messages (``receive``), connections opened and lost, results of handlers, the
app's input; it answers with session events for the app and actions for the shell (run these
calls, cancel these, switch connection, reconnect or finish). ``LiveProtocol``
(``livebridge.protocol.base``) holds what every vendor shares: the turn counter, the resumption
handle, the connection state table and the call ledger; this class reads Gemini's messages, so a
message carrying audio, a transcript and ``turnComplete`` at once is tested with plain calls.

Interrupted without cancellation: the service may interrupt a turn while BLOCKING calls are
pending and never send ``toolCallCancellation``. The calls were not withdrawn, so they keep
running and are answered as usual; a call re-delivered with the same id is not run again (the
ledger), and the same request re-issued under a new id is the dispatcher's to recognise.

What the model does (``livebridge.profiles``) shapes three rules here. A call without an id
(Vertex AI) is admitted under a key of the session's own (``nameless-call-N``) that never goes
on the wire, and answered by name, in call order; its streamed items are collected into one
answer. On a model where new input cancels a running BLOCKING call (``gemini-3.8-live``), text
or an activity start sent while one runs cancels it here, whether or not a
``toolCallCancellation`` follows: its fate is ``cancelled`` and nothing is sent for it.

Irreversible tools (``livebridge.calls.confirm``): a call arrives mid-generation, so a
``toolCall`` holding one is run unconfirmed (``RunCalls.confirmed`` False). ``generationComplete``
or ``turnComplete`` confirm it (``ConfirmCalls``); ``interrupted``, or text or an activity start
sent by the app, withdraw it first. Otherwise ``CallPolicy.confirm_window`` decides.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Literal

import msgspec

from livebridge import profiles
from livebridge.calls.call import Call
from livebridge.calls.lives import LiveCall, Outgoing, Via
from livebridge.calls.tools import ToolRegistry
from livebridge.errors import ConnectionLostError, LivebridgeError, LiveSessionError
from livebridge.protocol import resume
from livebridge.protocol.actions import (
    CancelCalls,
    ConfirmCalls,
    Finish,
    Output,
    ProtocolOptions,
    Reconnect,
    RunCalls,
    SwitchConnection,
)
from livebridge.protocol.base import LiveProtocol, log
from livebridge.protocol.encoding import b64decode
from livebridge.protocol.events import (
    AudioOut,
    Closed,
    GoAway,
    InputTranscript,
    Interrupted,
    OutputTranscript,
    TextOut,
    ToolCallStarted,
    TurnComplete,
)
from livebridge.protocol.resume import CloseDecision
from livebridge.protocol.transport import ClientItem, Frames, Signal, Text, ToolAnswers
from livebridge.vendors.gemini import answers as gemini_live
from livebridge.vendors.gemini import wire
from livebridge.vendors.gemini.client_frames import client_kinds
from livebridge.vendors.gemini.recording import GeminiWire

#: The start of the key a call without an id is known by inside the session.
NAMELESS_PREFIX = "nameless-call-"


class GeminiLiveProtocol(LiveProtocol):
    """The decisions of one Live conversation; see the module docstring."""

    vendor = "gemini"
    client_kinds = staticmethod(client_kinds)
    #: Microphone audio rate when the app names none (any rate is accepted: the frame says it).
    INPUT_RATE = 16_000

    def recording_codec(self) -> GeminiWire:
        return GeminiWire()

    def __init__(
        self,
        tools: ToolRegistry,
        options: ProtocolOptions | None = None,
        *,
        profile: profiles.ModelProfile = profiles.DEVELOPER_DEFAULT,
        observed: bool = True,
        delays: Iterator[float] | None = None,
    ) -> None:
        """``profile``: the model's (``livebridge.profiles``); the rest as ``LiveProtocol``."""
        super().__init__(
            tools,
            options,
            observed=observed,
            delays=delays,
            encode=gemini_live.encoder(profile.schedulings),
        )
        self.profile = profile
        self._messages = 0
        self._last_call_message = -1
        self._last_handle_message = -1
        self._nameless = 0  # calls without an id admitted so far
        self._unconfirmed: list[str] = []  # irreversible calls whose turn may be withdrawn

    @property
    def switch_ready(self) -> bool:
        """After ``goAway``: every call is answered and the newest handle covers them all."""
        return self.ledger.idle and self._last_handle_message > self._last_call_message

    # -- connections -----------------------------------------------------------------------

    def _classify(self, code: int | None, reason: str) -> CloseDecision:
        return resume.classify_close(code, reason, after_go_away=self.state == "going_away")

    def _first_failure(
        self, code: int | None, reason: str, decision: CloseDecision, error: LivebridgeError | None
    ) -> LivebridgeError:
        if error is not None:
            return error
        if decision.error is not None and decision.action != "resume":
            return decision.error  # says what to fix (model, key, payload): true on any connect
        # A loss that would be resumed mid-session: nothing was ever connected to resume.
        kind = type(decision.error) if isinstance(decision.error, LiveSessionError) else None
        return (kind or ConnectionLostError)(
            f"Could not open a Gemini Live session ({decision.reason}: "
            f"{reason or 'no reason'}). Nothing was connected yet; check the network path, the "
            "base URL (GOOGLE_GEMINI_BASE_URL) and the service status.",
            code=code,
            reason=reason,
        )

    def _reconnect(
        self, decision: CloseDecision, cause: LivebridgeError | None
    ) -> Reconnect | Finish | None:
        """No handle yet: nothing to resume. After ``goAway``: reconnect at once."""
        if self.handle is None:
            lost = ConnectionLostError(
                f"the connection ended ({decision.reason}) before the service issued a "
                "resumption handle, so the conversation cannot continue; start a new session"
            )
            return Finish(Closed(str(lost), lost))
        if decision.reason == "go_away" and cause is None:
            return Reconnect("go_away", 0.0)
        return None

    # -- server messages -------------------------------------------------------------------

    def receive(self, message: wire.ServerMessage, now: float) -> list[Output]:
        """A server message arrived: every decoded message enters here."""
        self.connection.move("message")
        self._messages += 1
        out: list[Output] = []
        if self._observed:
            for kind in wire.server_kinds(message):
                self._report.count("received", kind, out)
        # Each field that means something here, in ``SERVER_KINDS`` order; the rest
        # (``setupComplete``, ``usageMetadata`` alone, voice activity) mean nothing to the calls.
        # Read as fields, not as kinds: no tuple of kinds per message, no test per kind name.
        if message.server_content is not None:
            self._on_content(message.server_content, message.usage_metadata, now, out)
        if message.tool_call is not None:
            self._on_calls(message.tool_call.function_calls, "tool_call", now, out)
        if message.tool_call_cancellation is not None:
            self._on_cancellation(message.tool_call_cancellation.ids, now, out)
        if message.session_resumption_update is not None:
            self._on_handle(message.session_resumption_update)
        if message.go_away is not None:
            self._on_go_away(message.go_away, now, out)
        self.ledger.server_message()  # after its own calls: they crossed our answers in flight
        return out

    def _on_content(
        self,
        content: wire.ServerContent,
        usage: wire.UsageMetadata | None,
        now: float,
        out: list[Output],
    ) -> None:
        if content.interrupted:  # pending calls keep running: see the module docstring
            self._withdraw_turn("the model's turn was interrupted", out)
            out.append(Interrupted())
        if content.model_turn is not None:
            calls: list[wire.FunctionCall] = []
            for part in content.model_turn.parts:
                blob = part.inline_data
                if blob is not None and blob.data:
                    self._model_output(now)
                    out.append(AudioOut(b64decode(blob.data), wire.audio_rate(blob.mime_type)))
                if part.text and not part.thought:
                    self._model_output(now)
                    out.append(TextOut(part.text))
                if part.function_call is not None:
                    calls.append(part.function_call)
            if calls:
                self._on_calls(calls, "model_turn", now, out)
        heard = content.input_transcription
        if heard is not None and heard.text:
            out.append(InputTranscript(heard.text, bool(heard.finished)))
        said = content.output_transcription
        if said is not None and said.text:
            self._model_output(now)
            out.append(OutputTranscript(said.text, bool(said.finished)))
        if (content.generation_complete or content.turn_complete) and self._unconfirmed:
            out.append(ConfirmCalls(self._unconfirmed))  # the turn that issued them stands
            self._unconfirmed = []
        if content.turn_complete:
            self.turn += 1
            usage_dict = wire.to_builtins(usage) if usage is not None else None
            out.append(TurnComplete(usage_dict, content.turn_complete_reason))
            tokens = (
                (None, None)
                if usage is None
                else (
                    usage.prompt_token_count,
                    usage.response_token_count,
                )
            )
            self._model_turn_ended(tokens, out)
            self._report.flush_seen(out)

    def _on_calls(
        self, function_calls: Sequence[wire.FunctionCall], via: Via, now: float, out: list[Output]
    ) -> None:
        """Admit each call on its own: one malformed call never sinks the calls beside it."""
        live_calls: list[LiveCall] = []
        started: list[Output] = []  # each call's event: the app's when every call is admitted
        anonymous = False
        irreversible: set[str] | None = None  # ids of calls held until their turn stands
        tool_of = self.tools.get
        for fc in function_calls:
            call_id, name, args = fc.id, fc.name, fc.args
            if not isinstance(name, str):  # it matches no tool: answered unknown_function
                name = f"<not a name: {name!r:.80}>"
            if not (isinstance(call_id, str) and call_id):  # Vertex sends none: by name
                if call_id is not None and call_id != "":
                    log.warning("call to %r with an id that is not a string (%r)", name, call_id)
                call_id = self._nameless_key()
                nameless = anonymous = True
            else:
                nameless = False
            call = Call(call_id, name, {} if args is None else args)  # a non-object is refused
            tool = tool_of(name)
            if tool is None:
                live_calls.append(LiveCall(call, anonymous=nameless))
                started.append(ToolCallStarted(call_id, name, call.args, "BLOCKING"))
                continue
            behavior = tool.behavior
            live_calls.append(LiveCall(call, behavior, tool.scheduling, tool.streaming, nameless))
            started.append(ToolCallStarted(call_id, name, call.args, behavior))
            if tool.irreversible:
                if irreversible is None:
                    irreversible = set()
                irreversible.add(call_id)
        if not live_calls:
            return
        if anonymous:  # answered by name: a streamed item could not say which call it is
            live_calls = [msgspec.structs.replace(lc, streaming=False) for lc in live_calls]
        self._last_call_message = self._messages
        admitted = self.ledger.receive(live_calls, now, via=via)
        self._fates(out)
        if not admitted:
            return
        if len(admitted) == len(live_calls):  # all of them, in order: the common case
            out += started
        else:
            behaviors = {lc.call.id: lc.behavior for lc in live_calls}
            for call in admitted:
                out.append(ToolCallStarted(call.id, call.name, call.args, behaviors[call.id]))
        held = self._unconfirmed
        if irreversible is not None:
            held += [call.id for call in admitted if call.id in irreversible]
        out.append(
            RunCalls(
                admitted,
                self.turn,
                refuse=self._leaving,
                partials=not anonymous,
                confirmed=not held,
            )
        )

    def _withdraw_turn(self, why: str, out: list[Output]) -> None:
        """The turn is withdrawn before it was confirmed: its irreversible calls never run."""
        if self._unconfirmed:
            out.append(ConfirmCalls(self._unconfirmed, withdrawn=why))
            self._unconfirmed = []

    def _nameless_key(self) -> str:
        """A key for a call without an id: unique in this session, never sent."""
        while True:
            self._nameless += 1
            key = f"{NAMELESS_PREFIX}{self._nameless}"
            if self.ledger.state(key) is None:
                return key

    def _on_cancellation(self, ids: Sequence[str], now: float, out: list[Output]) -> None:
        running = self.ledger.cancel([i for i in ids if isinstance(i, str)], now)
        self._fates(out)
        if running:
            out.append(CancelCalls(running))

    def _cancel_blocking(self, now: float, out: list[Output]) -> None:
        """New input reached the service while BLOCKING calls run: on a model that cancels
        them for it, they are cancelled now (nothing will be sent for them)."""
        blocking = self.ledger.blocking_ids()
        if not blocking:
            return
        why = f"cancelled: new input arrived while it ran ({self.profile.family} cancels it)"
        running = self.ledger.cancel(blocking, now, why)
        self._fates(out)
        if running:
            out.append(CancelCalls(running))

    def _on_handle(self, update: wire.SessionResumptionUpdate) -> None:
        handle = update.new_handle
        if update.resumable and isinstance(handle, str) and handle:
            self.handle = handle
            self.ledger.handle_issued(handle)
            self._last_handle_message = self._messages

    def _on_go_away(self, go_away: wire.GoAway, now: float, out: list[Output]) -> None:
        try:
            time_left = wire.parse_duration(go_away.time_left or "0s")
        except ValueError:
            time_left = 0.0
        out.append(GoAway(time_left))
        first = self.state == "ready"
        self.connection.move("go_away")
        if first:
            margin = self.options.go_away_margin
            out.append(SwitchConnection(resume.reconnect_deadline(now, time_left, margin)))

    # -- audio and the writer --------------------------------------------------------------

    def truncate(self, played: float) -> Frames | None:
        """Nothing: the service itself cuts the interrupted turn to what was generated."""
        return None

    @property
    def input_encoding(self) -> Literal["pcm16", "pcmu"]:
        """What ``send_audio`` takes: 16-bit PCM, always."""
        return "pcm16"

    def input_rate(self, rate: int | None) -> int:
        """The rate to send app audio at: any rate the app names (the frame carries it)."""
        return self.INPUT_RATE if rate is None else rate

    def _answer_item(self, answers: Outgoing) -> ClientItem:
        """Answers go as one ``toolResponse``."""
        return ToolAnswers(answers.function_responses, answers.encoded)

    def _input_sent(self, item: ClientItem, now: float, out: list[Output]) -> None:
        if _is_new_input(item):
            self._withdraw_turn("new input from the user arrived", out)
            if self.profile.input_cancels_blocking:
                self._cancel_blocking(now, out)


def _is_new_input(item: ClientItem) -> bool:
    """Input the service takes as the user saying something new: text, or speech marked as
    starting. (Streamed audio is the service's to judge: it cancels with a message.)"""
    return isinstance(item, Text) or (isinstance(item, Signal) and item.kind == "activity_start")
