"""``OpenAIRealtimeProtocol``: one OpenAI Realtime (GA) conversation as a sans-I/O state machine.

The same skeleton as ``GeminiLiveProtocol`` (``livebridge.protocol.base.LiveProtocol``):
decoded server events (``openai_wire.ServerEvent``) and the time in, session events and actions
out. What differs, and why:

- **When calls run.** A call is a ``function_call`` output item, complete at
  ``response.function_call_arguments.done`` / ``response.output_item.done``, but those are also
  sent for a response that is then cancelled or cut short. Handlers start at ``response.done``
  and only when its status is ``completed``: the calls of a ``cancelled``, ``incomplete`` or
  ``failed`` response are never run nor answered (fate ``cancelled``, with the status and reason).
  The cost is the tail of the same response (function calls come last in it, so a few ms); the
  gain is that no handler with side effects runs for a generation the user interrupted, and the
  calls of one response are admitted together: fan-out, duplicate and grouping rules apply per
  response exactly as per Gemini ``toolCall``. The calls it runs are thus confirmed
  (``RunCalls.confirmed``): an irreversible tool waits for nothing more.
- **Grouping.** The calls of one response are one BLOCKING batch of the ledger: each gets one
  ``conversation.item.create`` (``function_call_output``, JSON text of the livebridge payload),
  and once every call of the batch is answered exactly one ``response.create`` follows. There
  is no NON_BLOCKING behaviour or ``scheduling`` on OpenAI: every call is treated as BLOCKING
  and a streaming handler's items are collected into its one output.
- **One continuation per set of outputs** (``protocol.openai_responses``). ``response.create``
  is held while a response is in progress and sent once it is done. A response the server
  starts after it acknowledged every output answers them, and none is sent; one it started
  before (user speech while the handlers ran) has not seen them, and the create follows once it
  is done. A create refused with ``conversation_already_has_active_response`` (a response began
  that had not been read yet; counted in ``active_response_errors``) is sent again once that
  response is done, unless that response had seen every output.
- **One fate per call** (``protocol.openai_calls``). A call id is taken once: a repeated
  ``response.done``, or one without an id (it ends the response in progress), never runs a call
  twice nor gives it a second fate. An id delivered again with other arguments is the server
  reusing it: a protocol error, answered ``call_id_reused`` (never with the first call's result).
- **One bad call fails alone.** Arguments that are not JSON, not valid Unicode (a lone UTF-16
  surrogate) or over the bounds on what unfinished responses may hold are answered
  ``invalid_arguments`` saying which; the other calls of the response run.
- **Turns.** ``TurnComplete`` comes with a ``response.done`` that ends the model's turn: not
  with one that completed with function calls (the model goes on in a new response once the
  outputs are in, as a Gemini turn goes on after ``toolResponse``).
- **Barge-in.** ``input_audio_buffer.speech_started`` is reported as ``Interrupted`` (stop
  playback), as Gemini's ``interrupted``; calls already running keep running and are answered.
  A response the server cancels because of the speech ends ``cancelled``: its calls never run.
- **Reconnects.** There is no resumption handle: a dropped connection loses the server's
  conversation. livebridge opens a new connection (same backoff and attempt limit as Gemini),
  which starts an empty conversation; every call of the old one without an answer is orphaned
  (reason says why), an owed ``response.create`` is dropped, and the app gets
  ``Resumed(fresh=True)``: it must send again whatever the model needs to know.
- **Frames.** Each output is its own frame; one that would exceed ``max_frame_bytes`` is
  answered with a ``result_too_large`` error instead.
- **Audio** is PCM16 mono at 24 kHz both ways, the only ``audio/pcm`` rate the API takes, or
  μ-law (``livebridge.vendors.openai.audio``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

import msgspec

from livebridge.calls import outcomes, payloads
from livebridge.calls.call import Call, Outcome, Partial
from livebridge.calls.lives import LiveCall, Outgoing
from livebridge.calls.observers import CallSettled
from livebridge.calls.tools import ToolRegistry
from livebridge.errors import ConnectionLostError, LivebridgeError, RemoteProtocolError
from livebridge.protocol.actions import Notify, Output, ProtocolOptions, RunCalls
from livebridge.protocol.base import LiveProtocol, log
from livebridge.protocol.events import (
    ErrorReported,
    InputTranscript,
    Interrupted,
    OutputTranscript,
    TextOut,
    ToolCallStarted,
    TurnComplete,
)
from livebridge.protocol.resume import CloseDecision
from livebridge.protocol.transport import ClientItem, Frames
from livebridge.vendors.openai import wire as openai_wire
from livebridge.vendors.openai.audio import Speech
from livebridge.vendors.openai.calls import HeldCall, Repeat, ResponseCalls
from livebridge.vendors.openai.errors import classify_close, service_error
from livebridge.vendors.openai.responses import Continuation
from livebridge.vendors.openai.wire import ServerEvent

#: The error code of a ``response.create`` sent while a response is in progress: tolerated.
ACTIVE_RESPONSE = "conversation_already_has_active_response"

_UNBOUNDED = 1 << 40  # the ledger's frame budget: each output is its own frame (see settled)
_FRESH = "fresh session"  # the ledger's reason for calls a new conversation does not know
#: The ledger's reasons, in this vendor's words.
_REASONS = {
    _FRESH: "the connection was lost and OpenAI Realtime cannot resume: the new conversation "
    "does not know this call"
}
_MAX_HEARD = 64
_LIVE = frozenset({"running", "settled", "ready"})
#: Server events that acknowledge a client's item (``.created`` is the beta name).
_ADDED = ("conversation.item.added", "conversation.item.created")


class OpenAIRealtimeProtocol(LiveProtocol):
    """The decisions of one OpenAI Realtime conversation; see the module docstring."""

    vendor = "openai"
    client_kinds = staticmethod(openai_wire.client_kinds)
    fresh_on_reconnect = True  # no resumption handle: ``handle`` stays None
    reasons = _REASONS

    def __init__(
        self,
        tools: ToolRegistry,
        options: ProtocolOptions | None = None,
        *,
        g711: tuple[bool, bool] = (False, False),
        observed: bool = True,
        delays: Iterator[float] | None = None,
    ) -> None:
        """``g711``: (input, output) configured as ``audio/pcmu`` (8 kHz μ-law) rather than
        PCM; the rest as ``LiveProtocol``."""
        super().__init__(
            tools,
            options,
            observed=observed,
            delays=delays,
            encode=openai_wire.answer,
            frame_budget=_UNBOUNDED,
        )
        self.speech = Speech(g711)
        self.active_response_errors = 0
        self.calls = ResponseCalls()  # calls of responses not done yet; ids with a fate
        self.continuation = Continuation()
        self._stranded: list[HeldCall] = []  # calls of responses cut by a lost connection
        self._heard: set[str] = set()  # input items whose transcript arrived as deltas
        self._handlers: dict[str, Callable[[ServerEvent, float, list[Output]], None]] = {
            "session.created": self._on_session,
            "response.created": self._on_response_created,
            "response.output_item.added": self._on_item,
            "response.output_item.done": self._on_item,
            "response.function_call_arguments.done": self._on_arguments,
            "response.done": self._on_response_done,
            **dict.fromkeys(_ADDED, self._on_added),
            "response.output_audio.delta": self._on_audio,
            "response.output_text.delta": self._on_text,
            "response.output_audio_transcript.delta": self._on_said,
            "conversation.item.input_audio_transcription.delta": self._on_heard,
            "conversation.item.input_audio_transcription.completed": self._on_heard_all,
            "input_audio_buffer.speech_started": self._on_speech,
            "input_audio_buffer.speech_stopped": self._on_speech_end,
            "error": self._on_error,
        }

    @property
    def idle(self) -> bool:
        """No call is waiting for its fate and no ``response.create`` is owed."""
        return self.ledger.idle and not self.continuation.owed

    # -- connections -----------------------------------------------------------------------

    def _classify(self, code: int | None, reason: str) -> CloseDecision:
        return classify_close(code, reason)

    def _first_failure(
        self, code: int | None, reason: str, decision: CloseDecision, error: LivebridgeError | None
    ) -> LivebridgeError:
        return error or ConnectionLostError(
            f"Could not open an OpenAI Realtime session ({code}: {reason or 'no reason'}). "
            "Check the network path and the base URL (OPENAI_BASE_URL).",
            code=code,
            reason=reason,
        )

    def _dropped(self) -> None:
        """The server's conversation is gone, with its responses in progress."""
        self._stranded += self.calls.drop_all()
        self.continuation.reset()

    def _reopen(self, resumed: bool, now: float, out: list[Output]) -> list[str]:
        """Always a new conversation: no call carries over."""
        self.continuation.reset()
        orphaned = self.ledger.resumed(None, now)
        self._fates(out)
        return orphaned + self._orphan_stranded(now, out)

    def _closing(self, why: str, now: float, out: list[Output]) -> None:
        self._stranded += self.calls.drop_all()
        self._orphan_stranded(now, out, why)

    # -- server events ---------------------------------------------------------------------

    def receive(self, message: ServerEvent, now: float) -> list[Output]:
        """A server event arrived; types livebridge does not use are counted and ignored."""
        self.connection.move("message")
        out: list[Output] = []
        if self._observed:
            self._report.count("received", message.type, out)
        handler = self._handlers.get(message.type)
        if handler is not None:
            handler(message, now, out)
        self.ledger.server_message()
        return out

    def _on_session(self, event: ServerEvent, now: float, out: list[Output]) -> None:
        if event.session is not None and self.session_id is None:
            self.session_id = event.session.id

    def _on_response_created(self, event: ServerEvent, now: float, out: list[Output]) -> None:
        response_id = event.response.id if event.response is not None else None
        if self.continuation.started(response_id):
            log.info("the server started a response after the outputs were in; no response.create")

    def _on_added(self, event: ServerEvent, now: float, out: list[Output]) -> None:
        item = event.item
        if item is not None and item.type == "function_call_output":
            self.continuation.acknowledged(item.call_id)

    def _on_item(self, event: ServerEvent, now: float, out: list[Output]) -> None:
        item = event.item
        if item is None or item.type != "function_call" or not event.response_id:
            return
        self._note(
            event.response_id, item.call_id, item.name, item.arguments, event.output_index, now, out
        )

    def _on_arguments(self, event: ServerEvent, now: float, out: list[Output]) -> None:
        if event.response_id:
            self._note(
                event.response_id,
                event.call_id,
                event.name,
                event.arguments,
                event.output_index,
                now,
                out,
            )

    def _note(
        self,
        response_id: str,
        call_id: str | None,
        name: str | None,
        arguments: str | None,
        index: int | None,
        now: float,
        out: list[Output],
    ) -> None:
        refused = self.calls.note(response_id, call_id, name, arguments, index)
        if refused is not None:
            limit = self.calls.max_calls
            why = f"more than {limit} calls are waiting for responses that are not done yet"
            self._withdraw([refused], why, now, out)

    def _on_response_done(self, event: ServerEvent, now: float, out: list[Output]) -> None:
        response = event.response
        if response is None:
            return
        taken_from = response.id or self.continuation.active  # without an id: the one in progress
        self.continuation.ended(response.id)
        calls, repeats = self.calls.take(taken_from, response.output or ())
        status = response.status or "completed"
        if repeats:
            self._repeated(repeats, response.id, status, now, out)
        if calls and status == "completed":
            self._admit(calls, now, out)
            self._report.flush_seen(out)
            return  # not the end of the model's turn: it goes on once the outputs are in
        if calls:
            details = response.status_details
            why = f" ({details.reason})" if details is not None and details.reason else ""
            self._withdraw(calls, f"its response ended {status}{why}", now, out)
        self.turn += 1
        out.append(TurnComplete(response.usage, status))
        self._model_turn_ended(usage_tokens(response.usage), out)
        self._report.flush_seen(out)

    def _repeated(
        self,
        repeats: list[Repeat],
        response_id: str | None,
        status: str,
        now: float,
        out: list[Output],
    ) -> None:
        """Call ids delivered again once they had their fate: the same call is ignored; an id
        reused for other arguments is a protocol error, answered as one when it can be."""
        reused: list[HeldCall] = []
        for item, same in repeats:
            call_id = item.call_id or ""
            if same:
                log.info(
                    "call %s delivered again (response %s); it has its fate", call_id, response_id
                )
                continue
            if status != "completed" or self.ledger.state(call_id) in _LIVE:
                message = _reused(call_id) + " Its first call keeps its own answer."
                log.warning("%s", message)
                out.append(ErrorReported(RemoteProtocolError(message)))
                continue
            reused.append(HeldCall(call_id, item.name, response_id or "", 0, item.arguments))
        if reused:
            self._admit(reused, now, out, refuse_reused=True)

    def _admit(
        self, calls: list[HeldCall], now: float, out: list[Output], *, refuse_reused: bool = False
    ) -> None:
        """The calls of one completed response: one batch, answered together.
        ``refuse_reused``: they reuse call ids; answer them ``call_id_reused``, never run."""
        live_calls = [
            LiveCall(Call(held.call_id, held.name or "<no name>", held.args())) for held in calls
        ]
        admitted = self.ledger.receive(live_calls, now)
        self._fates(out)
        if not admitted:
            return
        for call in admitted:
            out.append(ToolCallStarted(call.id, call.name, call.args, "BLOCKING"))
        if not refuse_reused:
            out.append(RunCalls(admitted, self.turn, refuse=self._leaving, partials=False))
            return
        for call in admitted:
            error = payloads.error("call_id_reused", _reused(call.id))
            outcome = outcomes.make(call, "rejected", error)
            if self._observed:
                out.append(Notify(self._settled_event(call, outcome, now)))
            out += self.settled(outcome)

    def _withdraw(self, calls: list[HeldCall], reason: str, now: float, out: list[Output]) -> None:
        """Calls that will never run nor be answered (their response did not complete): the
        ledger cancels them, never run, and reports them as every other fate."""
        withdrawn = [
            LiveCall(Call(held.call_id, held.name or "<no name>", held.args())) for held in calls
        ]
        for live_call in withdrawn:
            log.info("call %s (%s) cancelled: %s", live_call.call.id, live_call.call.name, reason)
        self.ledger.unrun(withdrawn, now, reason, "cancel")
        self._fates(out)
        if self._observed:  # observers hear the outcome its handler would have had
            for live_call in withdrawn:
                call = live_call.call
                outcome = outcomes.make(
                    call, "cancelled", payloads.error("cancelled", reason, retryable=True)
                )
                out.append(Notify(self._settled_event(call, outcome, now)))

    def _settled_event(self, call: Call, outcome: Outcome, now: float) -> CallSettled:
        """What observers hear of a call the protocol settles itself (never run)."""
        known = call.name in self.tools
        return CallSettled(self.session_id, self.turn, call, "BLOCKING", outcome, now, known)

    def _on_audio(self, event: ServerEvent, now: float, out: list[Output]) -> None:
        audio = self.speech.output(event.item_id, event.delta)
        if audio is not None:
            self._model_output(now)
            out.append(audio)

    def _on_text(self, event: ServerEvent, now: float, out: list[Output]) -> None:
        if event.delta:
            self._model_output(now)
            out.append(TextOut(event.delta))

    def _on_said(self, event: ServerEvent, now: float, out: list[Output]) -> None:
        if event.delta:
            self._model_output(now)
            out.append(OutputTranscript(event.delta))

    def _on_heard(self, event: ServerEvent, now: float, out: list[Output]) -> None:
        if event.delta:
            if len(self._heard) >= _MAX_HEARD:
                self._heard.clear()
            self._heard.add(event.item_id or "")
            out.append(InputTranscript(event.delta))

    def _on_heard_all(self, event: ServerEvent, now: float, out: list[Output]) -> None:
        streamed = (event.item_id or "") in self._heard
        self._heard.discard(event.item_id or "")
        text = "" if streamed else (event.transcript or "")
        out.append(InputTranscript(text, True))

    def _on_speech(self, event: ServerEvent, now: float, out: list[Output]) -> None:
        out.append(Interrupted())  # running calls keep running: see the module docstring

    def _on_speech_end(self, event: ServerEvent, now: float, out: list[Output]) -> None:
        self._user_turn_ended(now)  # the server's turn detection heard the user stop

    def _on_error(self, event: ServerEvent, now: float, out: list[Output]) -> None:
        detail = event.error or openai_wire.ErrorDetail()
        if detail.code == ACTIVE_RESPONSE:
            self.active_response_errors += 1
            if self.continuation.refused(detail.event_id):
                log.info(
                    "response.create refused, a response is in progress; %s",
                    "sent again once it is done"
                    if self.continuation.owed
                    else "it answers the outputs",
                )
            else:
                log.info("response.create refused, a response is in progress; the session goes on")
            if self._observed:
                self._report.count("received", f"error.{ACTIVE_RESPONSE}", out)
            return
        error = service_error(detail)
        log.warning("%s", error)
        out.append(ErrorReported(error))

    # -- handlers and the writer -----------------------------------------------------------

    def settled(self, outcome: Outcome) -> list[Output]:
        """A handler's final outcome; one whose frame would be too large becomes an error."""
        size = len(openai_wire.encode(openai_wire.answer(outcome)))
        limit = self.options.max_frame_bytes
        if size > limit:
            message = (
                f"The result of {outcome.name} is {size} bytes as a function_call_output, over "
                f"the frame limit of {limit} bytes (CallPolicy.max_frame_bytes): return less."
            )
            response = payloads.error("result_too_large", message, retryable=False)
            outcome = msgspec.structs.replace(
                outcome,
                kind="error",
                response=response,
                result_bytes=payloads.encoded_size(response),
            )
        return super().settled(outcome)

    def partial(self, item: Partial) -> list[Output]:
        """Not produced on OpenAI (``RunCalls.partials`` is off); dropped if it ever comes."""
        log.debug("call %s: streamed item dropped (OpenAI takes one output)", item.call_id)
        return []

    def truncate(self, played: float) -> Frames | None:
        """``conversation.item.truncate`` of the latest assistant audio at ``played`` seconds
        (what the user heard), so the conversation holds only what was heard."""
        return self.speech.truncate(played)

    @property
    def input_encoding(self) -> Literal["pcm16", "pcmu"]:
        return self.speech.encoding

    def input_rate(self, rate: int | None) -> int:
        return self.speech.input_rate(rate)

    def next_item(self, now: float) -> Outgoing | ClientItem | None:
        """Answers first, then the owed ``response.create`` (once no response is in
        progress), then the app's input in order."""
        ledger, continuation = self.ledger, self.continuation
        if ledger.idle and not continuation.owed:
            return self.outbox.take(blocking=False)
        answers = ledger.drain(now)
        if answers is not None:
            # Owed from the moment the outputs leave, not once the send returns: what the
            # server acknowledges or starts meanwhile may be read before the send returns.
            finals = [answer.call_id for answer in answers.answered if answer.outcome is not None]
            if finals:
                continuation.outputs_sent(finals)
            return answers
        if ledger.connected and (create := continuation.due()) is not None:
            return create
        return self.outbox.take(blocking=ledger.blocking_pending)

    def _answer_item(self, answers: Outgoing) -> ClientItem:
        """Answers go as one ``conversation.item.create`` frame per call."""
        return Frames(answers.function_responses, "conversation.item.create")

    def _input_sent(self, item: ClientItem, now: float, out: list[Output]) -> None:
        if isinstance(item, Frames) and item.kind == "response.create":
            self.continuation.sent(item)

    # -- reporting -------------------------------------------------------------------------

    def _orphan_stranded(self, now: float, out: list[Output], why: str | None = None) -> list[str]:
        """Calls of responses a lost connection cut short: the ledger orphans them, never run,
        and they are reported as every other fate."""
        stranded, self._stranded = self._stranded, []
        if not stranded:
            return []
        reason = why or "the connection was lost before the call's response was done"
        calls = [LiveCall(Call(held.call_id, held.name or "")) for held in stranded]
        orphaned = self.ledger.unrun(calls, now, reason, "orphan")
        self._fates(out)
        return orphaned


def usage_tokens(usage: Mapping[str, Any] | None) -> tuple[int | None, int | None]:
    """A response's input and output tokens, where the service reported them (Realtime and
    GPT-Live's backend report usage alike)."""
    if not usage:
        return None, None
    taken, given = usage.get("input_tokens"), usage.get("output_tokens")
    return (
        taken if isinstance(taken, int) else None,
        given if isinstance(given, int) else None,
    )


def _reused(call_id: str) -> str:
    return (
        f"The server reused call_id {call_id} for other arguments: a call_id names one call, "
        "so this one was not run. Issue it again under a new id."
    )
