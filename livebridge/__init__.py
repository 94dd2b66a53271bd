"""livebridge: Gemini Live and OpenAI Realtime sessions, every tool call answered exactly once.

This package's names are the public surface: what an app writes (the session and its options,
the tool registry, the policy and the call types, the events it matches on, observers, stores
and the one error tree) and the ``emulator``. Beside it, a few documented public modules:
``livebridge.errors``, ``.emulator``, ``.observe`` (observer records, Prometheus, traces),
``.store``, ``.recording``, ``.phone``, ``.mcp``, ``.profiles``, ``.adapters`` and
``.integrations.*``; each says what it exports in ``__all__``. Every other module is internal
(it declares no ``__all__``) and may change without notice: import from here or from those.

Importing the package is light: each name below is loaded from its module on first use, so
``import livebridge`` loads no SDK, websockets or Prometheus code until a name needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from livebridge.lazy import exports

if TYPE_CHECKING:
    from livebridge import emulator
    from livebridge.calls.approval import ApprovalRequest
    from livebridge.calls.call import (
        Call,
        CallContext,
        Outcome,
        Partial,
        Result,
    )
    from livebridge.calls.dispatch import Dispatcher
    from livebridge.calls.observers import Observer, Recorder
    from livebridge.calls.policy import CallPolicy
    from livebridge.calls.tools import Tool, ToolOptions, ToolRegistry
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
    from livebridge.live.session import LiveSession, SessionArgs
    from livebridge.profiles import ModelProfile
    from livebridge.protocol.events import (
        AudioOut,
        Closed,
        ErrorReported,
        EventsDropped,
        GoAway,
        InputTranscript,
        Interrupted,
        OutputTranscript,
        Resumed,
        SessionEvent,
        TextOut,
        ToolCallSettled,
        ToolCallStarted,
        TurnComplete,
    )
    from livebridge.store.limiter import RedisLimiter
    from livebridge.store.memory import MemoryStore
    from livebridge.store.postgres import PostgresStore
    from livebridge.store.redis import RedisStore
    from livebridge.vendors.gemini.client_frames import client_args

#: Where each public name lives; read on first access of the name.
_HOMES: dict[str, str] = {
    "emulator": "livebridge.emulator",
    "LiveSession": "livebridge.live.session",
    "SessionArgs": "livebridge.live.session",
    "SessionOptions": "livebridge.live.options",
    "ModelProfile": "livebridge.profiles",
    "client_args": "livebridge.vendors.gemini.client_frames",
    "Tool": "livebridge.calls.tools",
    "ToolRegistry": "livebridge.calls.tools",
    "ToolOptions": "livebridge.calls.tools",
    "Call": "livebridge.calls.call",
    "CallContext": "livebridge.calls.call",
    "Outcome": "livebridge.calls.call",
    "Partial": "livebridge.calls.call",
    "Result": "livebridge.calls.call",
    "ApprovalRequest": "livebridge.calls.approval",
    "CallPolicy": "livebridge.calls.policy",
    "Dispatcher": "livebridge.calls.dispatch",
    "AudioOut": "livebridge.protocol.events",
    "Closed": "livebridge.protocol.events",
    "ErrorReported": "livebridge.protocol.events",
    "EventsDropped": "livebridge.protocol.events",
    "GoAway": "livebridge.protocol.events",
    "InputTranscript": "livebridge.protocol.events",
    "Interrupted": "livebridge.protocol.events",
    "OutputTranscript": "livebridge.protocol.events",
    "Resumed": "livebridge.protocol.events",
    "SessionEvent": "livebridge.protocol.events",
    "TextOut": "livebridge.protocol.events",
    "ToolCallSettled": "livebridge.protocol.events",
    "ToolCallStarted": "livebridge.protocol.events",
    "TurnComplete": "livebridge.protocol.events",
    "Observer": "livebridge.calls.observers",
    "Recorder": "livebridge.calls.observers",
    "MemoryStore": "livebridge.store.memory",
    "PostgresStore": "livebridge.store.postgres",
    "RedisStore": "livebridge.store.redis",
    "RedisLimiter": "livebridge.store.limiter",
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
}

__all__ = [
    "ApprovalRequest",
    "AudioOut",
    "Call",
    "CallContext",
    "CallPolicy",
    "Closed",
    "ConnectTimeoutError",
    "ConnectionLostError",
    "ConnectionStateError",
    "ConversationBusyError",
    "DemoFailed",
    "Dispatcher",
    "ErrorReported",
    "EventsDropped",
    "EvictionPolicyError",
    "FrameTooLargeError",
    "GoAway",
    "InputTranscript",
    "Interrupted",
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
    "OutputTranscript",
    "Partial",
    "PolicyViolationError",
    "PostgresStore",
    "Recorder",
    "RecordingError",
    "RedisLimiter",
    "RedisStore",
    "RemoteProtocolError",
    "Result",
    "Resumed",
    "RunError",
    "ScenarioError",
    "ServerError",
    "ServiceReportedError",
    "SessionArgs",
    "SessionClosedError",
    "SessionEndedError",
    "SessionEvent",
    "SessionNotFoundError",
    "SessionOptions",
    "StoreError",
    "StoreUnavailableError",
    "TextOut",
    "Tool",
    "ToolCallSettled",
    "ToolCallStarted",
    "ToolError",
    "ToolOptions",
    "ToolRegistry",
    "TransportClosed",
    "TurnComplete",
    "UnserializableResult",
    "UsageError",
    "WireError",
    "client_args",
    "emulator",
]
__version__ = "0.2.0"


__getattr__, __dir__ = exports(__name__, _HOMES, __all__)
