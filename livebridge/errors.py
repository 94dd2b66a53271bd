"""Every exception livebridge raises on purpose, in two trees.

``ToolError`` is raised BY a handler: its message is safe to show the model. The session tree
says how a Live session ended against the app's wish; each message says what to do::

    LiveSessionError                  any way a Live session ends against the app's wish
    ├── ConnectionLostError           1006, keepalive ping timeout, network error: resumed
    ├── ServerError                   1011 (service unavailable, internal error): resumed
    ├── InvalidPayloadError           1007: the server rejected a message we sent (fatal)
    ├── PolicyViolationError          1008 (fatal)
    │   ├── ModelNotFoundError        the model name is wrong or not enabled for the key
    │   ├── SessionNotFoundError      the resumption handle is stale
    │   └── OperationAbortedError     reported for audio sent while a tool call was pending
    └── SessionClosedError            input sent to a session that is closing or closed
"""

from __future__ import annotations


class ToolError(Exception):
    """A failure whose message is safe to show the model.

    Raise it from a handler to answer ``{"error": {"type": "tool_error", "message": ...}}``;
    any other exception is answered with a generic message and logged with its traceback.
    """

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable


class LiveSessionError(Exception):
    """The Live session ended in a way the app must know about.

    ``code`` and ``reason`` are the websocket close code and reason, when there was one.
    """

    def __init__(self, message: str, *, code: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason


class ConnectionLostError(LiveSessionError):
    """The socket dropped without a proper close (network, keepalive); resumable."""


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


class SessionClosedError(LiveSessionError):
    """Input was sent to a session that is closing or closed."""
