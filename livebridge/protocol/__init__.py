"""Sans-I/O live protocols: decoded messages and the time in, events and actions out.

``base`` holds what every vendor shares (the connection state table, the actions); a vendor's
protocol (``gemini``, ``openai``) turns its messages into those. ``outbox`` is the app's input
waiting for the socket. None of it imports an SDK or a socket library.
"""

from livebridge.protocol.base import (
    Action,
    CancelCalls,
    ConnectionEvent,
    ConnectionState,
    ConnectionStateError,
    ConnectionTable,
    Finish,
    LiveProtocol,
    Notify,
    Output,
    ProtocolOptions,
    Reconnect,
    RunCalls,
    SwitchConnection,
)
from livebridge.protocol.gemini import GeminiLiveProtocol
from livebridge.protocol.openai import OpenAIRealtimeProtocol
from livebridge.protocol.outbox import AudioPolicy, Outbox

__all__ = [
    "Action",
    "AudioPolicy",
    "CancelCalls",
    "ConnectionEvent",
    "ConnectionState",
    "ConnectionStateError",
    "ConnectionTable",
    "Finish",
    "GeminiLiveProtocol",
    "LiveProtocol",
    "Notify",
    "OpenAIRealtimeProtocol",
    "Outbox",
    "Output",
    "ProtocolOptions",
    "Reconnect",
    "RunCalls",
    "SwitchConnection",
]
