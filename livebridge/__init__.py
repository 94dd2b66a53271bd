"""livebridge: Gemini Live API sessions in production, every tool call answered exactly once."""

from livebridge.calls import Call, CallContext, Outcome, Partial, Result
from livebridge.observe import Observer, Recorder

__all__ = [
    "Call",
    "CallContext",
    "Observer",
    "Outcome",
    "Partial",
    "Recorder",
    "Result",
]
__version__ = "0.1.0"
