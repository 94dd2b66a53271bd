"""Prometheus metrics of phone calls: pass ``PhoneMetrics(registry)`` to a bridge's listeners.

What a caller feels: ``livebridge_phone_response_latency_seconds`` (end of their speech → the
model's first audio sent to Twilio), ``livebridge_phone_barge_ins_total`` and
``livebridge_phone_mark_lag_seconds`` (how late a mark came back after its audio should have
played: the line's and Twilio's buffering). Labels come from fixed sets (how a call ended, why
a frame was skipped), never a call or stream id.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from livebridge.phone.bridge import (
    BargedIn,
    CallAnswered,
    CallEnded,
    DtmfPressed,
    FrameSkipped,
    MarkHeard,
    ModelAnswered,
    PhoneEvent,
)

#: A voice reply is felt as prompt under about a second and broken past a few.
LATENCY_BUCKETS = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)
#: Marks come back within a frame or two on a good line.
MARK_LAG_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)


class PhoneMetrics:
    """A bridge listener that counts calls, latency, barge-ins, mark lag and skipped frames."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.calls = Counter(
            "livebridge_phone_calls_total",
            "Phone calls ended, by how",
            ["reason"],
            registry=registry,
        )
        self.active = Gauge(
            "livebridge_phone_calls_active", "Phone calls in progress", registry=registry
        )
        self.latency = Histogram(
            "livebridge_phone_response_latency_seconds",
            "End of the caller's speech to the model's first audio sent",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.barge_ins = Counter(
            "livebridge_phone_barge_ins_total",
            "Times the caller spoke over the model and its audio was cleared",
            registry=registry,
        )
        self.mark_lag = Histogram(
            "livebridge_phone_mark_lag_seconds",
            "How late a mark came back after its audio should have played",
            buckets=MARK_LAG_BUCKETS,
            registry=registry,
        )
        self.skipped = Counter(
            "livebridge_phone_frames_skipped_total",
            "Twilio frames skipped, by why",
            ["reason"],
            registry=registry,
        )
        self.dtmf = Counter(
            "livebridge_phone_dtmf_total", "Keys the callers pressed", registry=registry
        )

    def __call__(self, event: PhoneEvent) -> None:
        match event:
            case CallAnswered():
                self.active.inc()
            case CallEnded(reason=reason, answered=answered):
                self.calls.labels(reason).inc()
                if answered:
                    self.active.dec()
            case ModelAnswered(latency=latency):
                self.latency.observe(latency)
            case BargedIn():
                self.barge_ins.inc()
            case MarkHeard(lag=lag):
                self.mark_lag.observe(lag)
            case FrameSkipped(reason=reason):
                self.skipped.labels(reason).inc()
            case DtmfPressed():
                self.dtmf.inc()
