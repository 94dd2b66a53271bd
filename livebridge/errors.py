"""Every exception livebridge raises on purpose, under one root.

Who broke the rule decides the branch: a handler, a caller of livebridge, the server, or the
session's end. Each message says what happened and what to do::

    LivebridgeError                   catch-all for livebridge's own errors
    ├── ToolError                     raised BY a handler: its message is safe to show the model
    │   ├── MCPUnavailableError       an MCP server died or is restarting: ``unavailable``
    │   └── MCPBadReplyError          an MCP reply that is not a tools/call result: ``bad_reply``
    ├── UnserializableResult          a handler returned something with no JSON form
    ├── LocalProtocolError            a caller of livebridge broke a rule (a bug in that code)
    │   ├── LedgerError               the session shell or a dispatcher misused the call ledger
    │   ├── InvalidCallError          bad input to ``Dispatcher.run`` (not a ``Call``, ...)
    │   └── ConnectionStateError      the shell reported a connection event out of order
    ├── UsageError                    the app used livebridge in a way it cannot serve
    │   ├── SessionClosedError        input sent to a session that is closing or closed
    │   │   └── SessionEndedError     the session ended on its own while the app's block ran
    │   ├── ModelCapabilityError      a tool the model cannot run as declared (at connect)
    │   ├── RecordingError            a recording that cannot begin, or is cut, corrupt, too new
    │   ├── ScenarioError             an emulator scenario that cannot be played
    │   └── RunError                  a command-line input the user can fix (one line, exit 2)
    ├── DemoFailed                    the demo conversation could not run to its end
    ├── RemoteProtocolError           the server sent something livebridge cannot accept
    │   ├── MalformedMessageError     a frame that does not decode as a Live message
    │   │   └── WireError             a client frame the service would refuse (the emulator)
    │   ├── FrameTooLargeError        a frame over the client's size limit
    │   └── ServiceReportedError      an ``error`` event (OpenAI Realtime): reported, not fatal
    ├── MCPError                      an MCP server could not start or list its tools (at connect)
    ├── StoreError                    the conversation store (``livebridge.store``) failed us
    │   ├── StoreUnavailableError     unreachable, too slow or full: the new call is refused
    │   ├── ConversationBusyError     another worker holds the conversation's live lease
    │   ├── LeaseLostError            another worker took the conversation over from this one
    │   └── EvictionPolicyError       a Redis that may evict keys (also a ``UsageError``)
    ├── TransportClosed               one connection ended (close code, reason): the session
    │                                 decides whether to resume (``resume.classify_close``)
    └── LiveSessionError              the Live session ended against the app's wish
        ├── ConnectionLostError       1006, keepalive ping timeout, network error: resumed
        ├── ConnectTimeoutError       the service did not finish opening within connect_timeout
        ├── ServerError               1011 (service unavailable, internal error): resumed
        ├── InvalidPayloadError       1007: the server rejected a message we sent (fatal)
        └── PolicyViolationError      1008 (fatal)
            ├── ModelNotFoundError    the model name is wrong or not enabled for the key
            ├── SessionNotFoundError  the resumption handle is stale
            └── OperationAbortedError reported for audio sent while a tool call was pending

``LiveSessionError`` is what ``LiveSession.connect()`` raises and ``Closed.error`` carries;
``RemoteProtocolError`` is what a single bad server message becomes: logged, answered where it
can be, never fatal on its own.
"""

from __future__ import annotations

__all__ = [
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
]


class LivebridgeError(Exception):
    """The root of every exception livebridge raises on purpose."""


class ToolError(LivebridgeError):
    """A failure whose message is safe to show the model.

    Raise it from a handler to answer ``{"error": {"type": "tool_error", "message": ...}}``;
    any other exception is answered with a generic message and logged with its traceback.
    """

    #: The answer's ``error.type``; a subclass may name its own kind of failure.
    kind: str = "tool_error"

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable


class UnserializableResult(LivebridgeError):
    """A handler returned something that cannot be encoded as JSON (answered as an error)."""


class DemoFailed(LivebridgeError):
    """The demo conversation could not run to its end."""


class LocalProtocolError(LivebridgeError):
    """Code calling livebridge broke one of its rules; nothing was changed."""


class LedgerError(LocalProtocolError):
    """The session shell or a dispatcher reported an event the call ledger cannot accept.

    The ledger's state is unchanged; this is a bug in the caller, never in the server's input.
    """


class InvalidCallError(LocalProtocolError, ValueError):
    """``Dispatcher.run`` was given something that is not a well-formed ``Call``."""


class ConnectionStateError(LocalProtocolError):
    """The shell reported a connection event the state table does not allow; nothing changed."""


class UsageError(LivebridgeError):
    """The app asked for something livebridge cannot do in this state."""


class SessionClosedError(UsageError):
    """Input was sent to a session that is closing or closed; open a new ``LiveSession``."""


class SessionEndedError(SessionClosedError):
    """The session ended while the app's ``async with`` block still ran, and not because the
    app asked: the service closed it, the connection was lost for good, the handle expired.

    The block was interrupted at its pending await (its ``finally`` clauses ran) and leaving it
    raises this; input sent after such an end raises it too. ``reason`` and ``error`` are the
    ``Closed`` event's (``error`` is also the ``__cause__``), ``code`` the close code when the
    service sent one. The session's events stay readable after the block.
    """

    def __init__(
        self, message: str, *, reason: str, error: Exception | None = None, code: int | None = None
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.error = error
        self.code = code


class ModelCapabilityError(UsageError):
    """A tool the chosen model cannot run as declared (``livebridge.profiles``).

    Raised by ``LiveSession.connect`` before any socket opens; the message names each tool,
    the model and the fix.
    """


class RecordingError(UsageError, ValueError):
    """A session recording cannot begin (at ``connect``) or be read; the message names the file
    (and the line)."""


class ScenarioError(UsageError):
    """A scenario cannot be played: a malformed step (named by its index), an unreadable file,
    or a step the emulator's protocol does not have."""


class RunError(UsageError):
    """A command-line input the user can fix; its message is the one line printed."""


class RemoteProtocolError(LivebridgeError):
    """The server sent something livebridge cannot accept (one message; the session goes on)."""


class MalformedMessageError(RemoteProtocolError, ValueError):
    """A server frame that does not decode as a Live message."""


class WireError(MalformedMessageError):
    """A client message the real service would reject (the emulator's codec); ``reason``
    mirrors its close reason.

    A ``MalformedMessageError``, so a ``ValueError`` too (``except ValueError`` still catches it).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class FrameTooLargeError(RemoteProtocolError):
    """A server frame larger than the client accepts (``max_size``); the frame is lost."""

    def __init__(self, message: str, *, size: int | None = None, limit: int | None = None) -> None:
        super().__init__(message)
        self.size = size
        self.limit = limit


class ServiceReportedError(RemoteProtocolError):
    """The service reported an error in an ``error`` event and kept the session open.

    ``type``, ``code`` and ``param`` are the event's; the message says what to do about it.
    """

    def __init__(
        self,
        message: str,
        *,
        type: str | None = None,
        code: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.type = type
        self.code = code
        self.param = param


class MCPUnavailableError(ToolError):
    """An MCP server is down mid-call (it died, or is being started again): the call's answer
    is ``unavailable``, retryable."""

    kind = "unavailable"


class MCPBadReplyError(ToolError):
    """An MCP server's reply to a call could not be read as a tools/call result: the call's
    answer is ``bad_reply``; the session goes on."""

    kind = "bad_reply"


class MCPError(LivebridgeError):
    """An MCP server (``livebridge.mcp``) could not start, initialize or list its tools, or its
    tools cannot be declared as configured; raised by ``LiveSession.connect`` before anything is
    opened, naming the server (``server``)."""

    def __init__(self, server: str, message: str) -> None:
        super().__init__(f"MCP server {server!r}: {message}")
        self.server = server


class StoreError(LivebridgeError):
    """The conversation store could not do what a session needed (``livebridge.store``)."""


class StoreUnavailableError(StoreError):
    """The store did not answer in time, or refused (down, full, a network error).

    A call that needed the store (a non-idempotent call's journal entry, a shared limiter's
    slot) is answered ``store_unavailable`` (retryable) and its handler does not run.
    """


class ConversationBusyError(StoreError):
    """Another worker holds a live lease on the conversation; retry after ``retry_after`` s."""

    def __init__(self, message: str, *, owner: str = "", retry_after: float = 0.0) -> None:
        super().__init__(message)
        self.owner = owner
        self.retry_after = retry_after


class LeaseLostError(StoreError):
    """This worker's lease ended and another worker owns the conversation now."""


class EvictionPolicyError(StoreError, UsageError):
    """The store's Redis may evict keys (``maxmemory-policy`` is not ``noeviction``, or cannot
    be read): it could delete a live conversation's lease or journal, so it is refused.

    ``policy`` is the policy read (None: unreadable). A configuration error, raised when the
    store or limiter first uses that Redis; ``allow_eviction=True`` turns it into a warning.
    """

    def __init__(self, message: str, *, policy: str | None = None) -> None:
        super().__init__(message)
        self.policy = policy


class TransportClosed(LivebridgeError):
    """One Live connection ended; ``code``/``reason`` are the close frame's (None: no frame).

    Not an error of the session by itself: the session resumes or ends depending on the code.
    ``error`` is set when livebridge itself closed the connection for a reason the app must
    learn (a ``FrameTooLargeError``).
    """

    def __init__(
        self, code: int | None, reason: str, *, error: LivebridgeError | None = None
    ) -> None:
        super().__init__(f"connection closed ({code}): {reason or 'no reason given'}")
        self.code = code
        self.reason = reason
        self.error = error


class LiveSessionError(LivebridgeError):
    """The Live session ended in a way the app must know about.

    ``code`` and ``reason`` are the websocket close code and reason, when there was one.
    """

    def __init__(self, message: str, *, code: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason


class ConnectionLostError(LiveSessionError):
    """The socket dropped without a proper close (network, keepalive); resumable."""


class ConnectTimeoutError(LiveSessionError):
    """The service accepted the connection but did not finish opening the session (the
    websocket handshake and the answer to ``setup`` or ``session.update``) within
    ``SessionOptions.connect_timeout`` seconds; ``host`` names it. Resumptions are retried."""

    def __init__(self, message: str, *, host: str = "", timeout: float = 0.0) -> None:
        super().__init__(message)
        self.host = host
        self.timeout = timeout


class ServerError(LiveSessionError):
    """The server closed with an internal error (1011); resumable."""


class InvalidPayloadError(LiveSessionError):
    """The server rejected a message as invalid (1007)."""


class PolicyViolationError(LiveSessionError):
    """The server refused the session (1008)."""


class ModelNotFoundError(PolicyViolationError):
    """The model does not exist or is not available to this key for the Live API."""


class SessionNotFoundError(PolicyViolationError):
    """The resumption handle no longer names a session."""


class OperationAbortedError(PolicyViolationError):
    """The server aborted the session ("The operation was aborted.")."""
