"""One trace record per settled tool call: a structured log line, and an OpenTelemetry span.

Aggregates hide "one of three calls timed out and the model quietly changed its answer"; a
record per call does not. Records go through the standard ``logging`` module (logger
``livebridge.observe.trace``), so any handler can ship them; spans are emitted only when
``opentelemetry-api`` is installed.
"""

from __future__ import annotations

import importlib
import json
import logging
import time
from typing import Any

from livebridge.calls import endings
from livebridge.calls.observers import CallOrphaned, CallSettled, Event
from livebridge.protocol.base import Redact


class TraceObserver:
    """Writes one ``INFO`` record per settled call, and a span when OpenTelemetry is present.

    Each record carries its fields both as attributes (``extra``: ``session``, ``turn``,
    ``call_id``, ``function``, ``arguments``, ``started_at``, ``latency``, ``outcome``,
    ``result_bytes``, ``truncated``, ``behavior``, and ``server`` for an MCP server's tool) and as
    one JSON-able dict, ``record.livebridge``.
    ``arguments`` is JSON text of at most ``max_args_bytes`` UTF-8 bytes, after ``redact(function,
    args)`` (a failing hook hides the arguments entirely). ``started_at`` is wall-clock epoch
    seconds when the call was received; ``latency`` is the handler's run time.
    ``tracer_provider`` defaults to OpenTelemetry's global one.
    """

    def __init__(
        self,
        logger: logging.Logger | None = None,
        *,
        max_args_bytes: int = 512,
        redact: Redact | None = None,
        tracer_provider: Any = None,
    ) -> None:
        self.logger = logger or logging.getLogger("livebridge.observe.trace")
        self.max_args_bytes = max_args_bytes
        self.redact = redact
        otel = _import_opentelemetry()
        self._otel = otel
        self._tracer = (
            None if otel is None else otel.get_tracer("livebridge", tracer_provider=tracer_provider)
        )

    @property
    def spans_enabled(self) -> bool:
        """True when OpenTelemetry was importable at construction."""
        return self._tracer is not None

    def on_event(self, event: Event) -> None:
        if isinstance(event, CallOrphaned):
            orphan = {
                "session": event.session_id,
                "call_id": event.call_id,
                "function": event.name,
                "outcome": "orphaned",
                "reason": event.reason,
            }
            self.logger.warning(
                "tool call orphaned: %s %s (%s)",
                event.name,
                event.call_id,
                event.reason,
                extra={**orphan, "livebridge": orphan},
            )
            return
        if not isinstance(event, CallSettled):
            return
        fields = self.record_fields(event)
        self.logger.info(
            "tool call settled: %s %s %s",
            fields["function"],
            fields["call_id"],
            fields["outcome"],
            extra={**fields, "livebridge": fields},
        )
        if self._tracer is not None:
            self._span(fields)

    def record_fields(self, event: CallSettled) -> dict[str, Any]:
        """The trace record of one settled call, as a JSON-able dict."""
        outcome = event.outcome
        age = time.monotonic() - event.started_at
        fields = {
            "session": event.session_id,
            "turn": event.turn,
            "call_id": event.call.id,
            "function": event.call.name,
            "arguments": self._arguments(event.call.name, event.call.args),
            "started_at": time.time() - age,
            "latency": outcome.latency,
            "outcome": outcome.kind,
            "result_bytes": outcome.result_bytes,
            "truncated": outcome.truncated,
            "behavior": event.behavior,
        }
        if event.server is not None:
            fields["server"] = event.server  # the MCP server that ran it
        return fields

    def _arguments(self, function: str, args: Any) -> str:
        if self.redact is not None and isinstance(args, dict):
            try:
                args = self.redact(function, args)
            except Exception:
                self.logger.exception("redaction of %s arguments failed", function)
                return '"<redaction failed>"'
        text = json.dumps(args, ensure_ascii=False, separators=(",", ":"), default=repr)
        return cap_utf8(text, self.max_args_bytes)

    def _span(self, fields: dict[str, Any]) -> None:
        assert self._otel is not None and self._tracer is not None
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": fields["function"],
            "gen_ai.tool.call.id": fields["call_id"],
            "livebridge.turn": fields["turn"],
            "livebridge.arguments": fields["arguments"],
            "livebridge.latency": fields["latency"],
            "livebridge.outcome": fields["outcome"],
            "livebridge.result_bytes": fields["result_bytes"],
            "livebridge.truncated": fields["truncated"],
            "livebridge.behavior": fields["behavior"],
        }
        if fields["session"] is not None:
            attributes["livebridge.live.session"] = fields["session"]
        if "server" in fields:
            attributes["livebridge.mcp.server"] = fields["server"]
        span = self._tracer.start_span(
            f"execute_tool {fields['function']}",
            attributes=attributes,
            start_time=int(fields["started_at"] * 1e9),
        )
        if fields["outcome"] in endings.TRACE_ERRORS:  # the table's ``trace_error`` column
            span.set_status(self._otel.Status(self._otel.StatusCode.ERROR, fields["outcome"]))
        span.end()


def cap_utf8(text: str, max_bytes: int) -> str:
    """``text`` if it fits in ``max_bytes`` UTF-8 bytes, else its head ending in ``...``."""
    encoded = text.encode()
    if len(encoded) <= max_bytes:
        return text
    return encoded[: max(max_bytes - 3, 0)].decode(errors="ignore") + "..."


def _import_opentelemetry() -> Any:
    """``opentelemetry.trace`` when ``opentelemetry-api`` is installed, else ``None``."""
    try:
        return importlib.import_module("opentelemetry.trace")
    except ImportError:
        return None
