"""Run the scripted conversation: the emulator, a real ``LiveSession`` over the wire, metrics.

Everything the demo shows is taken from the session's events and lifecycle observers; the
emulator's transcript and contract checker give the independent count at the end.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import anyio
from google.genai import types
from prometheus_client import CollectorRegistry

from livebridge.calls import endings
from livebridge.calls.observers import CallSettled, CallStarted, Event
from livebridge.demo.script import (
    OPENAI_STEPS,
    SLOW_CALL,
    STEPS,
    DemoTools,
    Step,
    model_side,
    openai_model_side,
)
from livebridge.emulator import Emulator, TranscriptEntry, Violation
from livebridge.errors import DemoFailed, SessionEndedError
from livebridge.live.options import SessionOptions
from livebridge.live.session import LiveSession
from livebridge.observe.metrics import PrometheusObserver
from livebridge.protocol.events import (
    AudioOut,
    Closed,
    GoAway,
    Interrupted,
    OutputTranscript,
    Resumed,
    TextOut,
    ToolCallSettled,
    ToolCallStarted,
    TurnComplete,
)

MODEL = "gemini-3.8-live"
CONFIG = types.LiveConnectConfig(
    response_modalities=[types.Modality.AUDIO],
    output_audio_transcription=types.AudioTranscriptionConfig(),
)
OPENAI_MODEL = "gpt-realtime-2"
OPENAI_CONFIG = {"output_modalities": ["audio"]}  # audio comes with its transcript
Vendor = Literal["gemini", "openai"]
#: Seconds between exchanges, and before the user barges in (times the pace).
PAUSE_BETWEEN_TURNS = 0.8
BARGE_IN_AFTER = 0.8
#: The whole conversation must finish within this many seconds.
DEADLINE = 60.0


@dataclass(slots=True)
class CallView:
    """One call as the demo shows it; times are seconds from the exchange's first call."""

    id: str
    name: str
    args: Any
    behavior: str
    outcome: str | None = None
    start: float = 0.0
    latency: float = 0.0
    turnaround: float | None = None
    error: str | None = None
    responses: int = 0
    batch: float = 0.0

    @property
    def end(self) -> float:
        return self.start + self.latency


@dataclass(slots=True)
class Exchange:
    """One user line and everything that followed it."""

    user: str
    barge_in: str | None = None
    replies: list[str] = field(default_factory=list)
    calls: list[CallView] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    audio_seconds: float = 0.0

    def batches(self) -> list[list[CallView]]:
        """Calls grouped by the ``toolCall`` message that carried them."""
        groups: dict[float, list[CallView]] = {}
        for call in self.calls:
            groups.setdefault(call.batch, []).append(call)
        return list(groups.values())


class Renderer(Protocol):
    """Where the conversation is shown as it happens."""

    def start(self, metrics_url: str | None, emulator_url: str) -> None: ...
    def user(self, text: str, *, barge_in: bool = False) -> None: ...
    def model(self, text: str) -> None: ...
    def call_started(self, call: CallView) -> None: ...
    def notice(self, text: str) -> None: ...
    def exchange_done(self, exchange: Exchange) -> None: ...


class Silent:
    """A renderer that shows nothing (``--json``)."""

    def start(self, metrics_url: str | None, emulator_url: str) -> None:
        pass

    def user(self, text: str, *, barge_in: bool = False) -> None:
        pass

    def model(self, text: str) -> None:
        pass

    def call_started(self, call: CallView) -> None:
        pass

    def notice(self, text: str) -> None:
        pass

    def exchange_done(self, exchange: Exchange) -> None:
        pass


class Timings:
    """Observer keeping when each call was received, when its handler ran and for how long."""

    def __init__(self) -> None:
        self.received: dict[str, float] = {}
        self.started: dict[str, float] = {}
        self.latency: dict[str, float] = {}

    def on_event(self, event: Event) -> None:
        if isinstance(event, CallStarted):
            self.started[event.call.id] = event.started_at
        elif isinstance(event, CallSettled):
            self.received[event.call.id] = event.started_at
            self.latency[event.call.id] = event.outcome.latency

    def latency_of(self, call_id: str, reported: float) -> float:
        """The handler's run time; for a call cancelled before it unwound, its time so far."""
        if call_id in self.latency:
            return self.latency[call_id]
        if not reported and call_id in self.started:
            return time.monotonic() - self.started[call_id]
        return reported


@dataclass(frozen=True, slots=True)
class DemoRun:
    """The outcome of one run: the JSON summary and the emulator's own record of the wire."""

    summary: dict[str, Any]
    transcript: list[TranscriptEntry]
    violations: list[Violation]

    @property
    def ok(self) -> bool:
        return bool(self.summary["ok"])


async def run_demo(
    renderer: Renderer | None = None,
    *,
    pace: float = 1.0,
    registry: CollectorRegistry | None = None,
    metrics_url: str | None = None,
    record: str | None = None,
    vendor: Vendor = "gemini",
) -> DemoRun:
    """Run the whole conversation and return its summary; raises ``DemoFailed`` if it breaks.

    The session's Prometheus metrics go to ``registry`` (a private one if not given); the caller
    serves it, and names its address in ``metrics_url``. ``record`` writes the session's
    recording there (``livebridge.recording.record``). ``vendor``: which Live API the emulator
    speaks and the session uses, with the same tools (``OPENAI_STEPS`` on OpenAI Realtime).
    """
    renderer = renderer or Silent()
    tools = DemoTools(pace)
    timings = Timings()
    prometheus = PrometheusObserver(
        registry or CollectorRegistry(), functions=tools.registry.names()
    )
    began = time.monotonic()
    openai = vendor == "openai"
    steps = OPENAI_STEPS if openai else STEPS
    emulator = Emulator(openai_model_side, protocol="openai") if openai else Emulator(model_side)
    async with emulator as emu:
        renderer.start(metrics_url, emu.base_url)
        exchanges: list[Exchange] = []
        try:
            with anyio.fail_after(DEADLINE):
                async with LiveSession.connect(
                    emu.openai_client() if openai else emu.client(),
                    model=OPENAI_MODEL if openai else MODEL,
                    tools=tools.registry,
                    config=OPENAI_CONFIG if openai else CONFIG,
                    observers=[timings, prometheus],
                    options=SessionOptions(transport="wire", record=record),
                ) as session:
                    for step in steps:
                        exchange = await _exchange(
                            session, step, tools, timings, renderer, pace, vendor
                        )
                        _count_responses(exchange, emu.transcript)
                        renderer.exchange_done(exchange)
                        exchanges.append(exchange)
                        await anyio.sleep(PAUSE_BETWEEN_TURNS * pace)
        except TimeoutError:
            raise DemoFailed(f"the conversation did not finish within {DEADLINE:g} s") from None
        except SessionEndedError as ended:
            raise DemoFailed(f"the session ended early: {ended.reason}") from None
        errors = [e for s in emu.connections for e in s.errors]
        connections = len(emu.connections)
        summary = summarize(exchanges, emu.transcript, emu.violations, errors, connections)
        summary["metrics_url"] = metrics_url
        summary["elapsed_s"] = round(time.monotonic() - began, 2)
        return DemoRun(summary, list(emu.transcript), list(emu.violations))


async def _exchange(
    session: LiveSession,
    step: Step,
    tools: DemoTools,
    timings: Timings,
    renderer: Renderer,
    pace: float,
    vendor: Vendor = "gemini",
) -> Exchange:
    exchange = Exchange(step.user, step.barge_in)
    views: dict[str, CallView] = {}
    renderer.user(step.user)
    await session.send_text(step.user)
    turns = 0
    resumed = False
    while turns < step.turns or (step.resumes and not resumed):
        event = await session.next_event()
        match event:
            case None | Closed():
                reason = event.reason if isinstance(event, Closed) else "no more events"
                raise DemoFailed(f"the session ended early: {reason}")
            case TextOut(text=text) | OutputTranscript(text=text):
                exchange.replies.append(text)
                renderer.model(text)
            case AudioOut(data=data, rate=rate):
                exchange.audio_seconds += len(data) / 2 / rate
            case ToolCallStarted():
                view = CallView(event.call_id, event.name, event.args, event.behavior)
                views[event.call_id] = view
                exchange.calls.append(view)
                renderer.call_started(view)
                if event.name == SLOW_CALL and step.barge_in and vendor == "gemini":
                    await tools.slow_call_started.wait()
                    await anyio.sleep(BARGE_IN_AFTER * pace)  # the user lets it run a moment
                    renderer.user(step.barge_in, barge_in=True)
                    await session.send_activity_start()
                    await session.send_text(step.barge_in)
                    await session.send_activity_end()
            case ToolCallSettled():
                if event.call_id not in views:  # cancelled before it ran (OpenAI response)
                    views[event.call_id] = CallView(event.call_id, event.name, {}, "-")
                    exchange.calls.append(views[event.call_id])
                view = views[event.call_id]
                view.outcome = event.ending
                view.latency = timings.latency_of(event.call_id, event.latency)
                view.turnaround = event.turnaround
                if event.error:
                    view.error = str(event.error.get("message") or event.error.get("type"))
            case Interrupted():
                _notice(exchange, renderer, "the user barged in: the model stops talking")
                if vendor == "openai" and step.barge_in:  # the server heard the user first
                    renderer.user(step.barge_in, barge_in=True)
                    await session.send_text(step.barge_in)
            case GoAway(time_left=left):
                _notice(
                    exchange,
                    renderer,
                    f"goAway: this connection closes in {left:g} s; "
                    "switching over once the pending call is answered",
                )
            case Resumed():
                resumed = True
                lost = f", {len(event.orphaned)} calls orphaned" if event.orphaned else ""
                _notice(
                    exchange,
                    renderer,
                    f"resumed on a new connection with handle {session.handle}{lost}",
                )
            case TurnComplete():
                turns += 1
            case _:
                pass
    _place_on_timeline(exchange, timings)
    return exchange


def _notice(exchange: Exchange, renderer: Renderer, text: str) -> None:
    exchange.notices.append(text)
    renderer.notice(text)


def _place_on_timeline(exchange: Exchange, timings: Timings) -> None:
    received = [timings.received[c.id] for c in exchange.calls if c.id in timings.received]
    if not received:
        return
    origin = min(received)
    for call in exchange.calls:
        call.batch = timings.received.get(call.id, origin) - origin
        call.start = timings.started.get(call.id, origin + call.batch) - origin


def _count_responses(exchange: Exchange, transcript: Sequence[TranscriptEntry]) -> None:
    """How many function responses each call got on the wire (streamed calls get several)."""
    counts = Counter(
        response.get("id")
        for entry in transcript
        if entry.direction == "client" and "toolResponse" in entry.message
        for response in entry.message["toolResponse"].get("functionResponses", [])
    )
    counts.update(_outputs(transcript))
    for call in exchange.calls:
        call.responses = counts[call.id]


def transcript_counts(transcript: Sequence[TranscriptEntry]) -> dict[str, int]:
    """What crossed the wire, counted from the emulator's transcript."""
    calls = responses = cancelled = 0
    messages: Counter[str] = Counter()
    for entry in transcript:
        message = entry.message
        messages[entry.direction] += 1
        if entry.direction == "server" and "toolCall" in message:
            calls += len(message["toolCall"].get("functionCalls", []))
        if entry.direction == "server" and "toolCallCancellation" in message:
            cancelled += len(message["toolCallCancellation"].get("ids", []))
        if entry.direction == "client" and "toolResponse" in message:
            responses += len(message["toolResponse"].get("functionResponses", []))
    calls += sum(1 for _ in _openai_calls(transcript, "completed"))
    cancelled += sum(1 for _ in _openai_calls(transcript, "cancelled", "incomplete", "failed"))
    responses += sum(_outputs(transcript).values())
    return {
        "function_calls": calls,
        "function_responses": responses,
        "cancelled_calls": cancelled,
        "client_messages": messages["client"],
        "server_messages": messages["server"],
    }


def _openai_calls(transcript: Sequence[TranscriptEntry], *statuses: str) -> Iterator[str]:
    """Call ids of OpenAI responses that ended with one of ``statuses``."""
    for entry in transcript:
        message = entry.message
        if entry.direction == "server" and message.get("type") == "response.done":
            response = message.get("response") or {}
            if response.get("status") in statuses:
                for item in response.get("output") or []:
                    if item.get("type") == "function_call":
                        yield str(item.get("call_id"))


def _outputs(transcript: Sequence[TranscriptEntry]) -> Counter[str]:
    """OpenAI ``function_call_output`` items sent, by call id."""
    return Counter(
        str(message["item"].get("call_id"))
        for entry in transcript
        if entry.direction == "client"
        and (message := entry.message).get("type") == "conversation.item.create"
        and (message.get("item") or {}).get("type") == "function_call_output"
    )


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * fraction // 1))
    return ordered[int(rank) - 1]


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def summarize(
    exchanges: Sequence[Exchange],
    transcript: Sequence[TranscriptEntry],
    violations: Sequence[Violation],
    scenario_errors: Sequence[str],
    connections: int,
) -> dict[str, Any]:
    """The JSON summary; ``ok`` is false on any error violation, lost call or scenario error."""
    calls = [call for exchange in exchanges for call in exchange.calls]
    outcomes = Counter(call.outcome for call in calls if call.outcome)
    turnarounds = [call.turnaround for call in calls if call.turnaround is not None]
    counts = transcript_counts(transcript)
    errors = [v for v in violations if v.severity == "error"]
    unsettled = [call.id for call in calls if call.outcome is None]
    lost = max(0, counts["function_calls"] - len(calls)) + len(unsettled)
    return {
        "ok": not errors and not lost and not scenario_errors,
        "calls": len(calls),
        "outcomes": {kind: outcomes[kind] for kind in endings.SHOWN},
        "answered_calls": sum(1 for call in calls if call.turnaround is not None),
        "turnaround_ms": {
            "p50": _ms(percentile(turnarounds, 0.5)),
            "p95": _ms(percentile(turnarounds, 0.95)),
            "max": _ms(max(turnarounds, default=0.0)),
        },
        "violations": len(errors),
        "warnings": len(violations) - len(errors),
        "violation_details": [
            {"kind": v.kind, "message": v.message, "severity": v.severity} for v in violations
        ],
        "lost_calls": lost,
        "scenario_errors": list(scenario_errors),
        "connections": connections,
        "audio_out_s": round(sum(e.audio_seconds for e in exchanges), 2),
        "transcript": counts,
        "turns": [_exchange_summary(exchange) for exchange in exchanges],
    }


def serial_and_actual(batch: Sequence[CallView]) -> tuple[float, float]:
    """A serial loop's time (sum of handler latencies) and the batch's actual turnaround."""
    serial = sum(call.latency for call in batch)
    actual = max((call.turnaround or 0.0 for call in batch), default=0.0)
    return serial, actual


def _exchange_summary(exchange: Exchange) -> dict[str, Any]:
    batches = exchange.batches()
    widest = max(batches, key=len, default=[])
    serial, actual = serial_and_actual(widest)
    return {
        "user": exchange.user,
        "barge_in": exchange.barge_in,
        "replies": exchange.replies,
        "notices": exchange.notices,
        "serial_ms": _ms(serial),
        "turnaround_ms": _ms(actual),
        "calls": [
            {
                "id": call.id,
                "name": call.name,
                "args": call.args,
                "behavior": call.behavior,
                "outcome": call.outcome,
                "start_ms": _ms(call.start),
                "latency_ms": _ms(call.latency),
                "turnaround_ms": _ms(call.turnaround),
                "responses": call.responses,
                "error": call.error,
            }
            for call in exchange.calls
        ],
    }
