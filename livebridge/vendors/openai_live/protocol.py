"""``GptLiveProtocol``: one GPT-Live session with Responses delegation, as a sans-I/O state
machine on the ``LiveProtocol`` skeleton.

What differs from OpenAI Realtime, and why:

- **Where calls come from.** The voice model has no tools; a hosted Responses backend calls
  them, and its events arrive nested in ``response.event`` envelopes. A call is admitted at its
  nested ``response.output_item.done`` (a completed ``function_call``): the completed snapshot's
  ``output`` is always empty, so waiting for the response's end would never see it. Each call
  starts at once (``ToolCallStarted``) and gets exactly one ``function_call_output``
  (``response.item.create``) as soon as its handler settles.
- **One continuation per gate opening** (``openai_live.gate``): ``response.create`` goes out
  once no call of the session is open and no backend response is still running, and only if an
  output (or user text) went out since the last one. Delegations overlap; the gate is
  session-wide, as the service's is.
- **Failed responses.** ``response.failed`` / ``response.incomplete`` drop the response's calls
  on the service; here they end ``cancelled`` (their handlers cancelled, the reason given), and
  they no longer hold the gate.
- **The budget.** The backend takes 128 items and 32,768 bytes for the whole session (the
  profile's figures); an output that does not fit what is left (keeping room for every other
  open call) is cut to fit and flagged ``"truncated": true``, so livebridge never provokes
  ``response_input_buffer_full``. If the service refuses an output anyway, the refusal is
  reported (``ErrorReported``) and the call is answered again with a short placeholder, so the
  gate never wedges.
- **Interruption** does not cancel backend work: calls run on.
- **No resumption.** A dropped socket ends the session; every open call is orphaned. A
  close after ``session.closed`` (a sideband's comes without a status, 1005) is a clean end.
- **Attached** (the sideband): no audio goes out (the call's media has its own transport);
  calls are read and answered as on the primary, each once by call id.
- **Audio** runs on, continuously, while calls run: the service's timeline moves only with
  input audio, so app audio is never held behind a call. The output track is continuous too:
  its silence between replies is not delivered, and the silence that closes a reply ends the
  voice's turn (``TurnComplete`` with reason ``"quiet"``: ``openai_live.voice``).
- **Counting.** A ``response.event`` envelope is counted as such and its nested event under its
  own type (``response.output_item.done``...), so metrics show what the backend did.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from livebridge.calls import payloads
from livebridge.calls.call import Behavior, Call, Outcome, Partial, Scheduling
from livebridge.calls.fields import parse_arguments
from livebridge.calls.lives import LiveCall, Outgoing
from livebridge.calls.tools import ToolRegistry
from livebridge.errors import (
    ConnectionLostError,
    LivebridgeError,
    ServiceReportedError,
)
from livebridge.protocol.actions import CancelCalls, Output, ProtocolOptions, RunCalls
from livebridge.protocol.base import LiveProtocol, log
from livebridge.protocol.encoding import b64decode
from livebridge.protocol.events import (
    AudioOut,
    ErrorReported,
    InputTranscript,
    OutputTranscript,
    TextOut,
    ToolCallStarted,
    TurnComplete,
)
from livebridge.protocol.resume import CloseDecision
from livebridge.protocol.transport import ClientItem, Frames, Text
from livebridge.vendors.openai.protocol import usage_tokens
from livebridge.vendors.openai_live import delegation, wire
from livebridge.vendors.openai_live.gate import OUTPUT_PREFIX, Budget, Gate
from livebridge.vendors.openai_live.recording import GptLiveWire
from livebridge.vendors.openai_live.voice import VoiceTrack

OUTPUTS_REQUIRED = "function_call_outputs_required"
BUFFER_FULL = "response_input_buffer_full"
_UNBOUNDED = 1 << 40  # each output is its own frame
_REPLY = "livebridge.delegation_reply"  # never on the wire: ``_answer_item`` unpacks it
_PLACEHOLDER = '{"error":{"type":"result_refused","message":"the result did not fit"}}'


def answer(
    answer: Outcome | Partial,
    *,
    behavior: Behavior = "BLOCKING",
    scheduling: Scheduling | None = None,
    streaming: bool = False,
    anonymous: bool = False,
) -> dict[str, Any]:
    """One call's answer: a ``response.item.create`` of its ``function_call_output``."""
    if isinstance(answer, Partial):
        raise ValueError(f"call {answer.call_id}: GPT-Live takes one output per call")
    if answer.name == delegation.DELEGATE:  # a client delegation: spoken commentary
        output = answer.response.get("output") if answer.kind == "ok" else None
        text = output if isinstance(output, str) and output.strip() else delegation.APOLOGY
        return {"type": _REPLY, "messages": delegation.appends(answer.call_id, text)}
    return {
        "type": "response.item.create",
        "event_id": OUTPUT_PREFIX + answer.call_id,
        "item": wire.output_item(answer.call_id, payloads.json_text(answer.response)),
    }


class GptLiveProtocol(LiveProtocol):
    """The decisions of one GPT-Live session; see the module docstring."""

    vendor = "openai"
    client_kinds = staticmethod(wire.client_kinds)
    fresh_on_reconnect = True

    def __init__(
        self,
        tools: ToolRegistry,
        options: ProtocolOptions | None = None,
        *,
        budget: tuple[int | None, int | None] = (None, None),
        g711: bool = False,
        client: bool = False,
        observed: bool = True,
        attached: bool = False,
    ) -> None:
        """``budget``: the backend's session input, (items, bytes); ``g711``: the session's
        audio is ``audio/pcmu``; ``client``: client delegation, ``tools`` holding the app's
        delegate (``openai_live.delegation``); ``attached``: a sideband connection."""
        super().__init__(
            tools, options, observed=observed, delays=None, encode=answer, frame_budget=_UNBOUNDED
        )
        self.gate = Gate(Budget(*budget))
        self._g711 = g711
        self.voice = VoiceTrack(g711)
        self._names: dict[str, str] = {}  # open call id -> tool name (for placeholders)
        self._resend: list[dict[str, Any]] = []  # outputs the service refused, re-answered
        self.refused: list[str] = []  # codes of the service's refusals, in order
        self._client = client
        self.acknowledged = 0  # appends the service placed on the timeline
        self.attached = attached
        self.session_closed = False  # the service said session.closed: the end is clean

    @property
    def wire_name(self) -> str:
        return "gpt-live"

    def recording_codec(self) -> GptLiveWire:
        return GptLiveWire()

    @property
    def idle(self) -> bool:
        return self.ledger.idle and not self.gate.owed and not self._resend

    # -- connections -------------------------------------------------------------------------

    def _classify(self, code: int | None, reason: str) -> CloseDecision:
        """Nothing resumes: any close ends the session (a clean one without an error)."""
        if code == 1000 or self.session_closed:
            return CloseDecision("end", "closed", None)
        error = ConnectionLostError(
            f"The GPT-Live connection ended ({code}: {reason or 'no reason'}). GPT-Live has no "
            "resumption: the session is over and every call without an answer is orphaned.",
            code=code,
            reason=reason,
        )
        return CloseDecision("end", "dropped", error)

    def _first_failure(
        self, code: int | None, reason: str, decision: CloseDecision, error: LivebridgeError | None
    ) -> LivebridgeError:
        return error or ConnectionLostError(
            f"Could not open a GPT-Live session ({code}: {reason or 'no reason'}). Check the "
            "network path and the base URL (OPENAI_BASE_URL).",
            code=code,
            reason=reason,
        )

    def _reopen(self, resumed: bool, now: float, out: list[Output]) -> list[str]:
        return self.ledger.resumed(None, now)

    # -- server events -------------------------------------------------------------------------

    def receive(self, message: wire.ServerEvent, now: float) -> list[Output]:
        self.connection.move("message")
        out: list[Output] = []
        if self._observed:
            self._report.count("received", message.type, out)
            if message.event is not None:
                self._report.count("received", message.event.type, out)
        kind = message.type
        if kind == "response.event" and message.event is not None:
            self._backend(message.delegation_id, message.event, now, out)
        elif kind == "session.output_audio.delta" and message.delta:
            self._output_audio(b64decode(message.delta), now, out)
        elif kind == "session.output_transcript.delta" and message.delta:
            self._model_output(now)
            out.append(OutputTranscript(message.delta))
        elif kind == "session.input_transcript.delta" and message.delta:
            out.append(InputTranscript(message.delta))
        elif kind == "session.delegation.created" and message.delegation is not None:
            self._delegated(message.delegation, message.offset_ms, now, out)
        elif kind == "session.commentary.appended":
            self.acknowledged += 1
        elif kind == "session.closed":
            self.session_closed = True
        elif kind in ("session.started", "session.updated") and message.session is not None:
            self.session_id = self.session_id or message.session.id
        elif kind == "error":
            self._on_error(message.error or wire.ErrorDetail(), now, out)
        self.ledger.server_message()
        return out

    def _backend(
        self, delegation: str | None, event: wire.BackendEvent, now: float, out: list[Output]
    ) -> None:
        kind = event.type
        response = event.response
        if kind == "response.created":
            self.gate.response_created(delegation, response.id if response else None)
        elif kind == "response.output_item.done":
            item = event.item
            if item is None or item.type != "function_call" or not item.call_id:
                return
            if item.status not in (None, "completed"):
                return
            if self.gate.call(delegation, item.call_id) is not None:
                self._admit(item, now, out)
        elif kind == "response.output_text.delta" and event.delta:
            self._model_output(now)
            out.append(TextOut(event.delta))
        elif kind in ("response.completed", "response.failed", "response.incomplete"):
            completed = kind == "response.completed"
            dropped = self.gate.response_ended(
                delegation, response.id if response else None, completed
            )
            if dropped:
                self._withdraw(dropped, _why(kind, response), now, out)
            if self.gate.is_open and self.gate.owed:
                out.append(CancelCalls(()))  # cancels nothing: wakes the writer, the gate opened
            elif self.gate.is_open:
                self.turn += 1
                usage = response.usage if response else None
                out.append(TurnComplete(usage, kind.removeprefix("response.")))
                self._model_turn_ended(usage_tokens(usage), out)

    def _output_audio(self, audio: bytes, now: float, out: list[Output]) -> None:
        """A chunk of the continuous track: a reply's audio is delivered, the silence
        between replies is not; the silence that closes a reply ends the voice's turn."""
        heard = self.voice.hear(audio)
        if heard == "drop":
            return
        if heard == "begin":
            self._model_output(now)
        out.append(AudioOut(audio, 8000, "pcmu") if self._g711 else AudioOut(audio, 24_000))
        if heard == "end":
            out.append(TurnComplete(None, "quiet"))

    def _admit(self, item: wire.BackendItem, now: float, out: list[Output]) -> None:
        call_id = item.call_id or ""
        name = item.name or "<no name>"
        call = Call(call_id, name, parse_arguments(item.arguments or ""))
        admitted = self.ledger.receive([LiveCall(call)], now)
        self._fates(out)
        if not admitted:
            self.gate.forget(call_id)
            return
        self._names[call_id] = name
        for each in admitted:
            out.append(ToolCallStarted(each.id, each.name, each.args, "BLOCKING"))
        out.append(RunCalls(admitted, self.turn, refuse=self._leaving, partials=False))

    def _delegated(
        self, given: wire.Delegation, offset: int | None, now: float, out: list[Output]
    ) -> None:
        """A client delegation: the app's delegate runs once for it, as a call."""
        if not self._client or given.target != "client" or not given.id:
            return
        args = {"delegation_id": given.id, "offset_ms": offset}
        admitted = self.ledger.receive([LiveCall(Call(given.id, delegation.DELEGATE, args))], now)
        self._fates(out)
        if admitted:
            out.append(RunCalls(admitted, self.turn, refuse=self._leaving, partials=False))

    def _withdraw(self, call_ids: list[str], why: str, now: float, out: list[Output]) -> None:
        """Calls the service dropped (their response failed): their fate is ``cancelled``."""
        for call_id in call_ids:
            self._names.pop(call_id, None)
        running = self.ledger.cancel(call_ids, now, why)
        self._fates(out)
        if running:
            out.append(CancelCalls(running))

    def _on_error(self, detail: wire.ErrorDetail, now: float, out: list[Output]) -> None:
        code = detail.code or detail.type or "error"
        said = (detail.message or "no message").rstrip(". ")
        where = f" (parameter {detail.param})" if detail.param else ""
        hint = ""
        if code == OUTPUTS_REQUIRED and self.gate.refused(detail.client_event_id):
            hint = " livebridge sends response.create again once the gate changes."
        elif code == BUFFER_FULL:
            hint = self._refill(detail.client_event_id)
        self.refused.append(code)
        error = ServiceReportedError(
            f"GPT-Live reported {code}{where}: {said}.{hint}",
            type=detail.type,
            code=detail.code,
            param=detail.param,
        )
        log.warning("%s", error)
        out.append(ErrorReported(error))

    def _refill(self, event_id: str | None) -> str:
        """An output the service refused for the budget: answer the call again, briefly."""
        if not event_id or not event_id.startswith(OUTPUT_PREFIX):
            return ""
        call_id = event_id.removeprefix(OUTPUT_PREFIX)
        self.gate.open[call_id] = None
        self._resend.append(
            {
                "type": "response.item.create",
                "event_id": f"{OUTPUT_PREFIX}{call_id}.placeholder",
                "item": wire.output_item(call_id, _PLACEHOLDER),
            }
        )
        return f" The call {call_id} is answered again with a short error."

    # -- handlers and the writer -----------------------------------------------------------------

    def settled(self, outcome: Outcome) -> list[Output]:
        """A handler's outcome, cut to what is left of the backend's budget."""
        gate = self.gate
        call_id = outcome.call_id
        allowed = gate.allowance(call_id) if call_id in gate.open else None
        size = wire.item_bytes(wire.output_item(call_id, payloads.json_text(outcome.response)))
        if allowed is not None and size > allowed:
            outcome = _cut(outcome, allowed, size)
            size = wire.item_bytes(wire.output_item(call_id, payloads.json_text(outcome.response)))
        if call_id in gate.open:
            gate.charge(call_id, size)
        return super().settled(outcome)

    def partial(self, item: Partial) -> list[Output]:
        log.debug("call %s: streamed item dropped (GPT-Live takes one output)", item.call_id)
        return []

    def truncate(self, played: float) -> Frames | None:
        return None  # GPT-Live has no truncation: the model decides when to stop speaking

    @property
    def input_encoding(self) -> Literal["pcm16", "pcmu"]:
        return "pcmu" if self._g711 else "pcm16"

    def input_rate(self, rate: int | None) -> int:
        if self.attached:
            raise ValueError(
                "an attached GPT-Live session sends no audio: the call's audio goes through "
                "its own transport (SIP, WebRTC or the primary websocket)"
            )
        wanted = 8000 if self._g711 else wire.INPUT_RATE
        if rate is None or rate == wanted:
            return wanted
        raise ValueError(f"this GPT-Live session takes audio at {wanted} Hz, not {rate} Hz")

    def next_item(self, now: float) -> Outgoing | ClientItem | None:
        """Answers first, then outputs answered again, then the gate's ``response.create``,
        then the app's input; audio is never held behind a call."""
        if self.ledger.idle and not self.gate.owed and not self._resend:
            return self.outbox.take(blocking=False)
        answers = self.ledger.drain(now)
        if answers is not None:
            sent = [a.call_id for a in answers.answered if a.outcome is not None]
            if self._client:
                sent = []  # replies to delegations: no backend, no gate
            self.gate.outputs_sent(sent)
            for call_id in sent:
                self._names.pop(call_id, None)
            return answers
        if self._resend:
            message = self._resend.pop(0)
            self.gate.outputs_sent([message["item"]["call_id"]])
            return Frames([message], "response.item.create")
        if self.ledger.connected and (create := self.gate.due()) is not None:
            return create
        return self.outbox.take(blocking=False)

    def _answer_item(self, answers: Outgoing) -> ClientItem:
        if not self._client:
            return Frames(answers.function_responses, "response.item.create")
        messages = [m for reply in answers.function_responses for m in reply.get("messages", ())]
        return Frames(messages, "session.commentary.append")

    def _input_sent(self, item: ClientItem, now: float, out: list[Output]) -> None:
        if isinstance(item, Frames) and item.kind == "response.create":
            self.gate.sent(item)
        elif isinstance(item, Text):
            self.gate.text_queued(wire.item_bytes(wire.user_message(item.text)))


def _cut(outcome: Outcome, allowed: int, size: int) -> Outcome:
    """``outcome`` with its output cut to fit ``allowed`` bytes, flagged ``"truncated"``."""
    text = payloads.json_text(outcome.response)
    room = max(0, allowed - (size - len(text.encode())) - 40)
    while True:
        cut = text.encode()[:room].decode("utf-8", "ignore")
        response: dict[str, Any] = {"output": cut, "truncated": True}
        item = wire.output_item(outcome.call_id, payloads.json_text(response))
        if wire.item_bytes(item) <= allowed or room == 0:
            break
        room = max(0, room - (wire.item_bytes(item) - allowed) - 8)
    if wire.item_bytes(item) > allowed:
        response = {"truncated": True}
    return msgspec.structs.replace(
        outcome,
        response=response,
        truncated=True,
        original_bytes=len(text.encode()),
        result_bytes=payloads.encoded_size(response),
    )


def _why(kind: str, response: wire.BackendResponse | None) -> str:
    detail: Any = None
    if response is not None:
        detail = response.error or response.incomplete_details
    said = f": {detail.get('message') or detail.get('reason') or detail}" if detail else ""
    return f"its backend response ended {kind.removeprefix('response.')}{said}"
