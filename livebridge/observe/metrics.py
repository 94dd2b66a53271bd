"""Prometheus metrics of tool calls and sessions, and the endpoint that serves them.

``PrometheusObserver`` turns lifecycle events into metrics; pass it to a session or dispatcher
through ``observers=[...]``. Labels are bounded by construction: function names outside the
registry collapse to ``other``, reconnect reasons and message kinds come from fixed sets, and no
label ever carries a session or call id.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any, get_args

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
)

from livebridge.calls import endings
from livebridge.calls.call import Behavior, Outcome
from livebridge.calls.endings import metric_label
from livebridge.calls.observers import (
    AnswerSent,
    BatchStarted,
    CallOrphaned,
    CallSettled,
    CallStarted,
    Event,
    LeaseChanged,
    MessageSeen,
    Reconnected,
    SessionClosed,
    SessionOpened,
    StoreOperation,
    TurnMeasured,
)

log = logging.getLogger("livebridge.observe.metrics")

#: Label value for anything outside a fixed set: unknown functions, reasons, message kinds.
OTHER = "other"

#: Seconds: 1 ms to 60 s, dense where tool calls usually land (10 ms to 5 s).
SECONDS_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    20.0,
    30.0,
    60.0,
)
CALLS_PER_TURN_BUCKETS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 64)
RESULT_BYTES_BUCKETS = (64, 256, 1024, 4096, 16_384, 65_536, 262_144, 1_048_576)
#: Tokens of one turn or one session: a short reply to a long conversation.
TOKEN_BUCKETS = (10, 30, 100, 300, 1000, 3000, 10_000, 30_000, 100_000, 300_000, 1_000_000)

REJECTION_REASONS = frozenset(
    {
        "unknown_function",
        "invalid_arguments",
        "fanout_limit",
        "session_closing",
        "store_unavailable",
        "outcome_unknown",
    }
)
STORE_OPERATIONS = frozenset({"acquire", "renew", "release", "load", "begin", "write"})
STORE_ERRORS = frozenset({"unavailable", "lease_lost", "busy", "dropped"})
LEASE_EVENTS = frozenset({"acquired", "resumed", "busy", "lost", "released"})
#: Seconds for store round trips: 0.1 ms (loopback Redis) to 2.5 s (past any sane timeout).
STORE_SECONDS_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
)
RECONNECT_REASONS = frozenset({"go_away", "dropped", "error", "timeout", "closed"})
MESSAGE_KINDS = frozenset(
    {
        # client → server
        "setup",
        "clientContent",
        "realtimeInput",
        "toolResponse",
        # server → client
        "setupComplete",
        "serverContent",
        "toolCall",
        "toolCallCancellation",
        "usageMetadata",
        "goAway",
        "sessionResumptionUpdate",
        "voiceActivityDetectionSignal",
        "voiceActivity",
        # OpenAI Realtime event types, client → server
        "input_audio_buffer.append",
        "input_audio_buffer.commit",
        "conversation.item.create",
        "response.create",
        # server → client
        "session.created",
        "session.updated",
        "response.created",
        "response.done",
        "response.output_item.added",
        "response.output_item.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_audio.delta",
        "response.output_text.delta",
        "response.output_audio_transcript.delta",
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "conversation.item.added",
        "conversation.item.done",
        "error",
        "error.conversation_already_has_active_response",
        # GPT-Live event types, client → server
        "session.start",
        "session.input_audio.append",
        "response.item.create",
        "session.instructions.append",
        "session.thinking.append",
        "session.commentary.append",
        "session.close",
        # server → client; a ``response.event`` envelope's nested event counts under its own
        "session.started",
        "session.closed",
        "session.output_audio.delta",
        "session.output_transcript.delta",
        "session.input_transcript.delta",
        "session.delegation.created",
        "session.instructions.appended",
        "session.thinking.appended",
        "session.commentary.appended",
        "response.event",
        "response.in_progress",
        "response.completed",
        "response.failed",
        "response.incomplete",
    }
)

#: The outcomes a failure ratio divides by, exported at 0 for every known function.
ZERO_OUTCOMES = endings.ZERO_OUTCOMES

#: Without an explicit ``functions`` list, at most this many distinct names get their own label.
MAX_FUNCTION_LABELS = 256


class PrometheusObserver:
    """Maintains livebridge's Prometheus metrics from lifecycle events.

    ``registry`` defaults to prometheus_client's global ``REGISTRY``; give each observer its own
    registry when a process holds several. ``functions`` is the set of tool names that get their
    own ``function`` label (usually ``registry.names()``); any other name is counted as ``other``.
    Without it, names the dispatcher marks as known are kept, up to ``MAX_FUNCTION_LABELS``.
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        functions: Iterable[str] | None = None,
    ) -> None:
        self.registry = REGISTRY if registry is None else registry
        self._functions = None if functions is None else frozenset(functions)
        self._seen_functions: set[str] = set()
        self._running: set[tuple[str | None, str]] = set()
        self._session_tokens: dict[str | None, list[int]] = {}
        self._lock = threading.Lock()
        r = self.registry
        self.calls = Counter(
            "livebridge_tool_calls",
            "Tool calls by function, outcome and behavior.",
            ["function", "outcome", "behavior"],
            registry=r,
        )
        self.duration = Histogram(
            "livebridge_tool_call_duration_seconds",
            "Handler run time of tool calls.",
            ["function"],
            buckets=SECONDS_BUCKETS,
            registry=r,
        )
        self.turnaround = Histogram(
            "livebridge_tool_turnaround_seconds",
            "From toolCall received to its answer sent: what the user waits for.",
            ["function", "behavior"],
            buckets=SECONDS_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge(
            "livebridge_tool_calls_in_flight", "Handlers running now.", registry=r
        )
        self.per_turn = Histogram(
            "livebridge_tool_calls_per_turn",
            "Calls issued together in one toolCall (one model turn).",
            buckets=CALLS_PER_TURN_BUCKETS,
            registry=r,
        )
        self.result_bytes = Histogram(
            "livebridge_tool_result_bytes",
            "Encoded size of successful results as sent (after truncation; a streamed "
            "call's items together).",
            ["function"],
            buckets=RESULT_BYTES_BUCKETS,
            registry=r,
        )
        self.truncations = Counter(
            "livebridge_tool_truncations",
            "Results cut to fit max_result_bytes.",
            ["function"],
            registry=r,
        )
        self.dedups = Counter(
            "livebridge_tool_dedups",
            "Calls answered from another call's result instead of running, by reason.",
            ["function", "reason"],
            registry=r,
        )
        self.rejections = Counter(
            "livebridge_tool_rejections",
            "Calls refused before running, by reason.",
            ["function", "reason"],
            registry=r,
        )
        self.cancellations = Counter(
            "livebridge_tool_cancellations",
            "Calls the server withdrew (toolCallCancellation) while they ran.",
            ["function"],
            registry=r,
        )
        self.orphans = Counter(
            "livebridge_tool_orphans",
            "Calls whose answer could not be delivered.",
            ["function"],
            registry=r,
        )
        self.sessions = Gauge("livebridge_sessions_active", "Open Live sessions.", registry=r)
        self.first_output = Histogram(
            "livebridge_turn_first_output_seconds",
            "From the end of the user's turn to the model's first audio or text.",
            buckets=SECONDS_BUCKETS,
            registry=r,
        )
        self.turn_tokens = Histogram(
            "livebridge_turn_tokens",
            "Tokens the service counted for one model turn, by direction.",
            ["direction"],
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        self.session_tokens = Histogram(
            "livebridge_session_tokens",
            "Tokens of a whole session (observed when it closes), by direction.",
            ["direction"],
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        self.reconnects = Counter(
            "livebridge_session_reconnects",
            "Sessions moved to a new socket, by reason.",
            ["reason"],
            registry=r,
        )
        self.messages = Counter(
            "livebridge_messages",
            "Live wire messages by direction and type (Gemini field, OpenAI event type).",
            ["direction", "type"],
            registry=r,
        )
        self.store_seconds = Histogram(
            "livebridge_store_operation_seconds",
            "Conversation store operations (livebridge.store), by operation.",
            ["operation"],
            buckets=STORE_SECONDS_BUCKETS,
            registry=r,
        )
        self.store_errors = Counter(
            "livebridge_store_errors",
            "Conversation store operations that failed, by operation and error.",
            ["operation", "error"],
            registry=r,
        )
        self.leases = Counter(
            "livebridge_store_lease_events",
            "Conversation leases: acquired, resumed (taken over), busy, lost, released.",
            ["event"],
            registry=r,
        )
        self.interrupted = Counter(
            "livebridge_store_interrupted_calls",
            "Calls found started without a result when a conversation was taken over.",
            registry=r,
        )
        self.mcp_calls = Counter(
            "livebridge_mcp_calls",
            "MCP servers' tool calls by server and outcome.",
            ["server", "outcome"],
            registry=r,
        )
        self._zeros()
        from livebridge.mcp.metrics import MCPCollector  # the process's MCP server connections

        r.register(MCPCollector())

    def _zeros(self) -> None:
        """Export at 0 the series that ratios and alerts read before anything happened (calls
        by outcome, orphans, reconnects, lease events): a rate of 0, not "no data". Rarer series
        (rejections, dedups, truncations, cancellations, store errors by operation) appear with
        their first event, so a registry's idle scrape stays small."""
        for reason in sorted(RECONNECT_REASONS | {OTHER}):
            self.reconnects.labels(reason)
        for event in sorted(LEASE_EVENTS):
            self.leases.labels(event)
        if self._functions is None:
            return
        for function in sorted(self._functions | {OTHER}):
            for outcome in endings.ZERO_OUTCOMES:  # the table's, read when the registry starts
                for behavior in get_args(Behavior):
                    self.calls.labels(function, metric_label(outcome), behavior)
            self.orphans.labels(function)

    def on_event(self, event: Event) -> None:
        match event:
            case CallStarted():
                with self._lock:
                    self._running.add((event.session_id, event.call.id))
                self.in_flight.inc()
            case CallSettled():
                self._settled(event)
            case CallOrphaned():
                function = self.function_label(event.name, known=event.known_function)
                self.orphans.labels(function).inc()
            case BatchStarted():
                self.per_turn.observe(event.size)
            case AnswerSent():
                for outcome, turnaround, behavior, known in zip(
                    event.outcomes,
                    event.turnarounds,
                    event.behaviors,
                    event.known_functions,
                    strict=True,
                ):
                    function = self.function_label(outcome.name, known=known)
                    self.turnaround.labels(function, behavior).observe(turnaround)
            case SessionOpened():
                self.sessions.inc()
            case SessionClosed():
                self.sessions.dec()
                with self._lock:
                    spent = self._session_tokens.pop(event.session_id, None)
                if spent is not None:
                    self.session_tokens.labels("input").observe(spent[0])
                    self.session_tokens.labels("output").observe(spent[1])
            case TurnMeasured():
                self._turn(event)
            case Reconnected():
                self.reconnects.labels(_bounded(event.reason, RECONNECT_REASONS)).inc()
            case MessageSeen():
                kind = event.kind if "." in event.kind else _camel(event.kind)  # OpenAI's as is
                kind = _bounded(kind, MESSAGE_KINDS)
                self.messages.labels(event.direction, kind).inc(event.count)
            case StoreOperation():
                operation = _bounded(event.operation, STORE_OPERATIONS)
                if event.error is None:
                    self.store_seconds.labels(operation).observe(event.seconds)
                else:
                    error = _bounded(event.error, STORE_ERRORS)
                    self.store_errors.labels(operation, error).inc()
            case LeaseChanged():
                self.leases.labels(_bounded(event.event, LEASE_EVENTS)).inc()
                if event.interrupted:
                    self.interrupted.inc(event.interrupted)

    def _turn(self, event: TurnMeasured) -> None:
        if event.first_output is not None:
            self.first_output.observe(event.first_output)
        if event.input_tokens is None and event.output_tokens is None:
            return
        taken, given = event.input_tokens or 0, event.output_tokens or 0
        self.turn_tokens.labels("input").observe(taken)
        self.turn_tokens.labels("output").observe(given)
        with self._lock:
            spent = self._session_tokens.setdefault(event.session_id, [0, 0])
            spent[0] += taken
            spent[1] += given

    def function_label(self, name: str, *, known: bool = True) -> str:
        """The ``function`` label for ``name``: itself if it is a known tool, else ``other``."""
        if not known:
            return OTHER
        if self._functions is not None:
            return name if name in self._functions else OTHER
        with self._lock:
            if name in self._seen_functions:
                return name
            if len(self._seen_functions) < MAX_FUNCTION_LABELS:
                self._seen_functions.add(name)
                return name
        return OTHER

    def _settled(self, event: CallSettled) -> None:
        outcome = event.outcome
        function = self.function_label(event.call.name, known=event.known_function)
        label = metric_label(outcome.kind)
        self.calls.labels(function, label, event.behavior).inc()
        with self._lock:
            key = (event.session_id, event.call.id)
            ran = key in self._running
            self._running.discard(key)
        if ran:
            self.in_flight.dec()
            self.duration.labels(function).observe(outcome.latency)
        if event.server is not None:
            self.mcp_calls.labels(event.server, label).inc()
        if outcome.kind == "ok":
            self.result_bytes.labels(function).observe(outcome.result_bytes)
        if outcome.truncated:
            self.truncations.labels(function).inc()
        if outcome.dedup is not None:
            self.dedups.labels(function, outcome.dedup).inc()
        if outcome.kind == "rejected":
            self.rejections.labels(function, _rejection_reason(outcome)).inc()
        elif outcome.kind == "cancelled":
            self.cancellations.labels(function).inc()


def _rejection_reason(outcome: Outcome) -> str:
    error = outcome.response.get("error")
    kind = error.get("type") if isinstance(error, dict) else None
    return _bounded(kind, REJECTION_REASONS)


def _bounded(value: Any, allowed: frozenset[str]) -> str:
    return value if isinstance(value, str) and value in allowed else OTHER


def _camel(kind: str) -> str:
    """``tool_call`` → ``toolCall``; camelCase passes through unchanged."""
    head, *rest = kind.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)
