"""livebridge: Gemini Live and OpenAI Realtime sessions, every tool call answered exactly once.

Importing the package is light: each name below is loaded from its module on first use, so
``import livebridge`` loads no SDK, websockets or Prometheus code until a name needs it.
``livebridge.emulator`` (the local Live API server) is reachable the same way.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from livebridge import emulator
    from livebridge.calls.approval import ApprovalRequest
    from livebridge.calls.call import Call, CallContext, Outcome, Partial, Result
    from livebridge.calls.dispatch import Dispatcher
    from livebridge.calls.observers import Observer, Recorder
    from livebridge.calls.policy import CallPolicy
    from livebridge.calls.tools import Tool, ToolRegistry
    from livebridge.errors import (
        ConnectionLostError,
        ConnectionStateError,
        ConnectTimeoutError,
        ConversationBusyError,
        DemoFailed,
        EvictionPolicyError,
        FrameTooLargeError,
        InvalidCallError,
        InvalidPayloadError,
        LeaseLostError,
        LedgerError,
        LivebridgeError,
        LiveSessionError,
        LocalProtocolError,
        MalformedMessageError,
        MCPBadReplyError,
        MCPError,
        MCPUnavailableError,
        ModelCapabilityError,
        ModelNotFoundError,
        OperationAbortedError,
        PolicyViolationError,
        RecordingError,
        RemoteProtocolError,
        RunError,
        ScenarioError,
        ServerError,
        ServiceReportedError,
        SessionClosedError,
        SessionEndedError,
        SessionNotFoundError,
        StoreError,
        StoreUnavailableError,
        ToolError,
        TransportClosed,
        UnserializableResult,
        UsageError,
        WireError,
    )
    from livebridge.live.options import SessionOptions
    from livebridge.live.session import LiveSession
    from livebridge.profiles import ModelProfile
    from livebridge.store import MemoryStore, PostgresStore, RedisLimiter, RedisStore
    from livebridge.vendors.gemini.client_frames import client_args

#: Where each public name lives; read on first access of the name.
_HOMES: dict[str, str] = {
    "ApprovalRequest": "livebridge.calls.approval",
    "Call": "livebridge.calls.call",
    "CallContext": "livebridge.calls.call",
    "Outcome": "livebridge.calls.call",
    "Partial": "livebridge.calls.call",
    "Result": "livebridge.calls.call",
    "CallPolicy": "livebridge.calls.dispatch",
    "Dispatcher": "livebridge.calls.dispatch",
    **dict.fromkeys(
        [
            "ConnectTimeoutError",
            "ConnectionLostError",
            "ConnectionStateError",
            "ConversationBusyError",
            "DemoFailed",
            "EvictionPolicyError",
            "FrameTooLargeError",
            "InvalidCallError",
            "InvalidPayloadError",
            "LeaseLostError",
            "LedgerError",
            "LiveSessionError",
            "LivebridgeError",
            "LocalProtocolError",
            "MCPBadReplyError",
            "MCPError",
            "MCPUnavailableError",
            "MalformedMessageError",
            "ModelCapabilityError",
            "ModelNotFoundError",
            "OperationAbortedError",
            "PolicyViolationError",
            "RecordingError",
            "RemoteProtocolError",
            "RunError",
            "ScenarioError",
            "ServerError",
            "ServiceReportedError",
            "SessionClosedError",
            "SessionEndedError",
            "SessionNotFoundError",
            "StoreError",
            "StoreUnavailableError",
            "ToolError",
            "TransportClosed",
            "UnserializableResult",
            "UsageError",
            "WireError",
        ],
        "livebridge.errors",
    ),
    "ModelProfile": "livebridge.profiles",
    "Observer": "livebridge.calls.observers",
    "Recorder": "livebridge.calls.observers",
    "LiveSession": "livebridge.live.session",
    "SessionOptions": "livebridge.live.session",
    "MemoryStore": "livebridge.store",
    "PostgresStore": "livebridge.store",
    "RedisLimiter": "livebridge.store",
    "RedisStore": "livebridge.store",
    "Tool": "livebridge.calls.tools",
    "ToolRegistry": "livebridge.calls.tools",
    "client_args": "livebridge.vendors.gemini.client_frames",
}

__all__ = [
    "ApprovalRequest",
    "Call",
    "CallContext",
    "CallPolicy",
    "ConnectTimeoutError",
    "ConnectionLostError",
    "ConnectionStateError",
    "ConversationBusyError",
    "DemoFailed",
    "Dispatcher",
    "EvictionPolicyError",
    "FrameTooLargeError",
    "InvalidCallError",
    "InvalidPayloadError",
    "LeaseLostError",
    "LedgerError",
    "LiveSession",
    "LiveSessionError",
    "LivebridgeError",
    "LocalProtocolError",
    "MCPBadReplyError",
    "MCPError",
    "MCPUnavailableError",
    "MalformedMessageError",
    "MemoryStore",
    "ModelCapabilityError",
    "ModelNotFoundError",
    "ModelProfile",
    "Observer",
    "OperationAbortedError",
    "Outcome",
    "Partial",
    "PolicyViolationError",
    "PostgresStore",
    "Recorder",
    "RecordingError",
    "RedisLimiter",
    "RedisStore",
    "RemoteProtocolError",
    "Result",
    "RunError",
    "ScenarioError",
    "ServerError",
    "ServiceReportedError",
    "SessionClosedError",
    "SessionEndedError",
    "SessionNotFoundError",
    "SessionOptions",
    "StoreError",
    "StoreUnavailableError",
    "Tool",
    "ToolError",
    "ToolRegistry",
    "TransportClosed",
    "UnserializableResult",
    "UsageError",
    "WireError",
    "client_args",
    "emulator",
]
__version__ = "0.2.0"


def __getattr__(name: str) -> Any:
    if name == "emulator":
        return importlib.import_module("livebridge.emulator")
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'livebridge' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
