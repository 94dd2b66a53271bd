"""Watching sessions from outside, a public module: observers, the records they receive,
Prometheus metrics and their scrape endpoint, and traces.

An observer is anything with ``on_event(record)`` (``Observer``), given to a session, a
dispatcher or a phone line through ``observers=[...]``; ``Recorder`` keeps every record. The
records (``CallSettled``, ``LeaseChanged``, ... and their union ``Event``) are what the tool core
emits; ``PrometheusObserver`` counts them, ``serve(port)`` or ``asgi_app()`` serves the counts,
``TraceObserver`` logs (and spans) one record per settled call. The names are loaded on first
use: importing this module loads no Prometheus code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from livebridge.lazy import exports

if TYPE_CHECKING:
    from livebridge.calls.observers import (
        AnswerSent,
        BatchSettled,
        BatchStarted,
        CallOrphaned,
        CallSettled,
        CallStarted,
        Event,
        LeaseChanged,
        MessageSeen,
        Observer,
        Reconnected,
        Recorder,
        RecordingFailed,
        RecordingTruncated,
        SessionClosed,
        SessionOpened,
        StoreOperation,
        TurnMeasured,
    )
    from livebridge.observe.metrics import PrometheusObserver
    from livebridge.observe.scrape import asgi_app, serve
    from livebridge.observe.trace import TraceObserver

#: Where each name lives; read on first access of the name.
_HOMES: dict[str, str] = {
    **dict.fromkeys(
        [
            "AnswerSent",
            "BatchSettled",
            "BatchStarted",
            "CallOrphaned",
            "CallSettled",
            "CallStarted",
            "Event",
            "LeaseChanged",
            "MessageSeen",
            "Observer",
            "Reconnected",
            "Recorder",
            "RecordingFailed",
            "RecordingTruncated",
            "SessionClosed",
            "SessionOpened",
            "StoreOperation",
            "TurnMeasured",
        ],
        "livebridge.calls.observers",
    ),
    "PrometheusObserver": "livebridge.observe.metrics",
    "TraceObserver": "livebridge.observe.trace",
    "asgi_app": "livebridge.observe.scrape",
    "serve": "livebridge.observe.scrape",
}

__all__ = [
    "AnswerSent",
    "BatchSettled",
    "BatchStarted",
    "CallOrphaned",
    "CallSettled",
    "CallStarted",
    "Event",
    "LeaseChanged",
    "MessageSeen",
    "Observer",
    "PrometheusObserver",
    "Reconnected",
    "Recorder",
    "RecordingFailed",
    "RecordingTruncated",
    "SessionClosed",
    "SessionOpened",
    "StoreOperation",
    "TraceObserver",
    "TurnMeasured",
    "asgi_app",
    "serve",
]


__getattr__, __dir__ = exports(__name__, _HOMES, __all__)
