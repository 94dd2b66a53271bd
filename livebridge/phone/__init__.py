"""Phone calls, a public module: a Twilio Media Streams (or Telnyx) bridge to a ``LiveSession``,
offline-testable end to end.

An app answers calls with a ``PhoneAgent`` (or a function of the ``IncomingCall`` that returns
one) served by ``asgi_app`` (``serve_app`` runs it with uvicorn); underneath, a ``PhoneBridge``
joins each stream to one session under ``PhoneOptions``, speaking the provider's ``MediaCodec``
(``TwilioStream``, ``TelnyxStream``). Listeners receive the ``PhoneEvent``s (``CallAnswered`` ...
``CallEnded``); ``PhoneMetrics`` is one. ``SimulatedCaller`` (``ring``, ``speech``) plays the
provider's side in tests. Needs the ``phone`` extra (``pip install './livebridge[phone]'`` from
a clone); the names are imported on first use, so that importing the package stays light. Its
modules are internal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from livebridge.lazy import exports

if TYPE_CHECKING:
    from livebridge.phone.agent import IncomingCall, PhoneAgent, session_opener
    from livebridge.phone.asgi import asgi_app
    from livebridge.phone.bridge import (
        BargedIn,
        CallAnswered,
        CallEnded,
        DtmfPressed,
        FrameSkipped,
        MarkHeard,
        MediaCodec,
        ModelAnswered,
        PhoneBridge,
        PhoneEvent,
        PhoneOptions,
    )
    from livebridge.phone.caller import SimulatedCaller, ring, speech
    from livebridge.phone.metrics import PhoneMetrics
    from livebridge.phone.server import serve_app
    from livebridge.phone.telnyx import TelnyxStream
    from livebridge.phone.twilio import TwilioStream

#: Where each name lives; read on first access of the name.
_HOMES: dict[str, str] = {
    "IncomingCall": "livebridge.phone.agent",
    "PhoneAgent": "livebridge.phone.agent",
    "session_opener": "livebridge.phone.agent",
    "asgi_app": "livebridge.phone.asgi",
    "BargedIn": "livebridge.phone.bridge",
    "CallAnswered": "livebridge.phone.bridge",
    "CallEnded": "livebridge.phone.bridge",
    "DtmfPressed": "livebridge.phone.bridge",
    "FrameSkipped": "livebridge.phone.bridge",
    "MarkHeard": "livebridge.phone.bridge",
    "MediaCodec": "livebridge.phone.bridge",
    "ModelAnswered": "livebridge.phone.bridge",
    "PhoneBridge": "livebridge.phone.bridge",
    "PhoneEvent": "livebridge.phone.bridge",
    "PhoneOptions": "livebridge.phone.bridge",
    "SimulatedCaller": "livebridge.phone.caller",
    "ring": "livebridge.phone.caller",
    "speech": "livebridge.phone.caller",
    "PhoneMetrics": "livebridge.phone.metrics",
    "serve_app": "livebridge.phone.server",
    "TelnyxStream": "livebridge.phone.telnyx",
    "TwilioStream": "livebridge.phone.twilio",
}

__all__ = [
    "BargedIn",
    "CallAnswered",
    "CallEnded",
    "DtmfPressed",
    "FrameSkipped",
    "IncomingCall",
    "MarkHeard",
    "MediaCodec",
    "ModelAnswered",
    "PhoneAgent",
    "PhoneBridge",
    "PhoneEvent",
    "PhoneMetrics",
    "PhoneOptions",
    "SimulatedCaller",
    "TelnyxStream",
    "TwilioStream",
    "asgi_app",
    "ring",
    "serve_app",
    "session_opener",
    "speech",
]


__getattr__, __dir__ = exports(__name__, _HOMES, __all__)
