"""livebridge: Gemini Live API sessions in production, every tool call answered exactly once."""

from livebridge.calls import Call, CallContext, Outcome, Partial, Result
from livebridge.dispatch import CallPolicy, Dispatcher
from livebridge.errors import ToolError
from livebridge.observe import Observer, Recorder
from livebridge.tools import Tool, ToolRegistry

__all__ = [
    "Call",
    "CallContext",
    "CallPolicy",
    "Dispatcher",
    "Observer",
    "Outcome",
    "Partial",
    "Recorder",
    "Result",
    "Tool",
    "ToolError",
    "ToolRegistry",
]
__version__ = "0.1.0"
