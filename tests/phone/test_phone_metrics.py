"""Phone metrics: what a call reports, counted with labels from fixed sets."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from livebridge.phone.bridge import (
    BargedIn,
    CallAnswered,
    CallEnded,
    DtmfPressed,
    FrameSkipped,
    MarkHeard,
    ModelAnswered,
)
from livebridge.phone.metrics import PhoneMetrics
from livebridge.phone.twilio import StreamStarted


def test_a_call_is_counted() -> None:
    registry = CollectorRegistry()
    metrics = PhoneMetrics(registry)
    metrics(CallEnded("disconnected", answered=False))  # never started: not active
    metrics(CallAnswered(StreamStarted("MZ1")))
    assert registry.get_sample_value("livebridge_phone_calls_active") == 1
    for event in (
        ModelAnswered(0.4),
        MarkHeard("u1.1", 0.03),
        BargedIn(0.2, 1.0),
        FrameSkipped("bad_payload"),
        DtmfPressed("3"),
        CallEnded("caller_hung_up"),
    ):
        metrics(event)
    value = registry.get_sample_value
    assert value("livebridge_phone_calls_active") == 0
    assert value("livebridge_phone_calls_total", {"reason": "caller_hung_up"}) == 1
    assert value("livebridge_phone_calls_total", {"reason": "disconnected"}) == 1
    assert value("livebridge_phone_response_latency_seconds_sum") == 0.4
    assert value("livebridge_phone_response_latency_seconds_bucket", {"le": "0.5"}) == 1
    assert value("livebridge_phone_mark_lag_seconds_count") == 1
    assert value("livebridge_phone_barge_ins_total") == 1
    assert value("livebridge_phone_frames_skipped_total", {"reason": "bad_payload"}) == 1
    assert value("livebridge_phone_dtmf_total") == 1
