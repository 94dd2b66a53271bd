"""Phone calls: a Twilio Media Streams bridge to a ``LiveSession``, offline-testable end to end.

``twilio`` is the Media Streams message codec, ``audio`` the G.711 and resampling, ``playout``
what the caller has heard, ``bridge`` one stream ↔ one session, ``agent`` who answers each
call, ``caller`` a simulated Twilio side for tests and the demo. Needs the ``phone`` extra
(``pip install './livebridge[phone]'`` from a clone); the names below are imported on first
use, so that importing the package stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from livebridge.phone.agent import IncomingCall, PhoneAgent

__all__ = ["IncomingCall", "PhoneAgent"]

_HOMES = {"IncomingCall": "livebridge.phone.agent", "PhoneAgent": "livebridge.phone.agent"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'livebridge.phone' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
