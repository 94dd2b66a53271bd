"""livebridge: Gemini Live API sessions in production, every tool call answered exactly once."""

from livebridge.calls import Call, CallContext, Outcome, Partial, Result
from livebridge.dispatch import CallPolicy, Dispatcher
from livebridge.errors import (
    ConnectionLostError,
    FrameTooLargeError,
    InvalidCallError,
    InvalidPayloadError,
    LedgerError,
    LivebridgeError,
    LiveSessionError,
    LocalProtocolError,
    MalformedMessageError,
    ModelNotFoundError,
    OperationAbortedError,
    PolicyViolationError,
    RemoteProtocolError,
    ServerError,
    SessionClosedError,
    SessionNotFoundError,
    ToolError,
    UsageError,
)
from livebridge.observe import Observer, Recorder
from livebridge.session import LiveSession, SessionOptions
from livebridge.tools import Tool, ToolRegistry
from livebridge.transport import client_args

__all__ = [
    "Call",
    "CallContext",
    "CallPolicy",
    "ConnectionLostError",
    "Dispatcher",
    "FrameTooLargeError",
    "InvalidCallError",
    "InvalidPayloadError",
    "LedgerError",
    "LiveSession",
    "LiveSessionError",
    "LivebridgeError",
    "LocalProtocolError",
    "MalformedMessageError",
    "ModelNotFoundError",
    "Observer",
    "OperationAbortedError",
    "Outcome",
    "Partial",
    "PolicyViolationError",
    "Recorder",
    "RemoteProtocolError",
    "Result",
    "ServerError",
    "SessionClosedError",
    "SessionNotFoundError",
    "SessionOptions",
    "Tool",
    "ToolError",
    "ToolRegistry",
    "UsageError",
    "client_args",
]
__version__ = "0.1.0"
