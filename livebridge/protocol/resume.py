"""What to do when a Live socket ends or is about to: pure policy, no clock and no I/O.

Close codes become the typed errors of ``livebridge.errors``.

Close codes and reasons are those reported from the real service: 1007 for a field it refuses
(livekit/agents#3784, #5262) and for a stale handle after a long session, 1011 "Deadline
expired" at its end (discuss.ai.google.dev t/186392), 1011 for a resumption while the old
socket is open (aicc2025/sip-to-ai PR #14); handles last about 2 hours (ai.google.dev,
Live API session management).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from livebridge.errors import (
    ConnectionLostError,
    FrameTooLargeError,
    InvalidPayloadError,
    LivebridgeError,
    LiveSessionError,
    ModelNotFoundError,
    OperationAbortedError,
    PolicyViolationError,
    ServerError,
    SessionNotFoundError,
)

#: ``resume``: connect again with the newest resumption handle; ``end``: the session is over.
CloseAction = Literal["resume", "end"]


@dataclass(frozen=True, slots=True)
class CloseDecision:
    """What to do about a closed socket.

    ``reason`` is a short label for events and metrics; ``error`` is what the app gets when the
    session ends (or what it is told about a resume); None for an expected close.
    """

    action: CloseAction
    reason: str
    error: LivebridgeError | None


def backoff(
    initial: float = 0.25,
    factor: float = 2.0,
    maximum: float = 10.0,
    jitter: float = 0.1,
    rand: Callable[[], float] = random.random,
) -> Iterator[float]:
    """Delays before each reconnect attempt: exponential, capped, endless.

    Each delay is spread by ``±jitter`` (a fraction) so that many sessions dropped together do
    not reconnect together; ``rand`` returns a float in [0, 1) and is injectable for tests.
    """
    if initial <= 0 or factor < 1 or maximum < initial or not 0 <= jitter < 1:
        raise ValueError("need initial > 0, factor >= 1, maximum >= initial, 0 <= jitter < 1")
    delay = initial
    while True:
        yield delay * (1 + jitter * (2 * rand() - 1))
        delay = min(maximum, delay * factor)


def classify_close(code: int | None, reason: str, *, after_go_away: bool = False) -> CloseDecision:
    """Decide retry / resume / give up for a socket closed with ``code`` and ``reason``.

    ``code`` is None when the connection failed without a close frame (network error).
    ``after_go_away`` is true when the server announced the end with ``goAway``.
    """
    text = reason.lower()
    error: LiveSessionError
    if code == 1000:
        if after_go_away:
            return CloseDecision("resume", "go_away", None)
        return CloseDecision("end", "closed", None)
    if code is None or code in (1001, 1006):
        error = ConnectionLostError(
            f"The connection to the Live API was lost (close code {code}, {reason or 'no reason'})."
            " It is resumed with the newest handle; if this repeats, check the network path.",
            code=code,
            reason=reason,
        )
        return CloseDecision("resume", "dropped", error)
    if code == 1011:
        return _internal_error(reason, text, after_go_away)
    if code == 1009:
        return CloseDecision("resume", "frame_too_large", frame_too_large(reason))
    if code == 1007:
        error = InvalidPayloadError(
            f"The Live API rejected a message as invalid (1007: {reason}). Fix the message it "
            "names: an unsupported field (e.g. 'scheduling' on Vertex), a deprecated input "
            "(mediaChunks) or a config the model does not support.",
            code=code,
            reason=reason,
        )
        return CloseDecision("end", "invalid_payload", error)
    if code == 1008:
        return _policy_violation(reason, text)
    error = LiveSessionError(
        f"The Live API closed the session with unexpected code {code} ({reason or 'no reason'})."
        " Start a new session; report the code if it repeats.",
        code=code,
        reason=reason,
    )
    return CloseDecision("end", "unexpected_close", error)


def _internal_error(reason: str, text: str, after_go_away: bool) -> CloseDecision:
    error: LiveSessionError
    if "keepalive ping timeout" in text:
        error = ConnectionLostError(
            "The server did not answer a websocket ping in time (keepalive timeout, 1011). "
            "It is resumed with the newest handle; raise ping_timeout (keepalive_settings) "
            "if this repeats.",
            code=1011,
            reason=reason,
        )
        return CloseDecision("resume", "keepalive_timeout", error)
    if after_go_away and "deadline expired" in text:
        return CloseDecision("resume", "go_away", None)
    error = ServerError(
        f"The Live API failed on its side (1011: {reason or 'no reason'}). It is resumed "
        "with the newest handle; if it repeats, retry later or check the service status.",
        code=1011,
        reason=reason,
    )
    return CloseDecision("resume", "server_error", error)


def _policy_violation(reason: str, text: str) -> CloseDecision:
    error: PolicyViolationError
    if "session not found" in text:
        label = "session_not_found"
        error = SessionNotFoundError(
            f"The resumption handle is stale (1008: {reason}): handles expire a few hours "
            "after the session ends. Connect again without a handle to start a fresh session "
            "(the conversation history is lost).",
            code=1008,
            reason=reason,
        )
    elif ("not found" in text or "not_found" in text) and "model" in text:
        label = "model_not_found"
        error = ModelNotFoundError(
            f"The model was not found (1008: {reason}). Check the model name, that it supports "
            "the Live API, and the API version (v1 / v1beta / v1alpha) it is published under.",
            code=1008,
            reason=reason,
        )
    elif "operation was aborted" in text:
        label = "operation_aborted"
        error = OperationAbortedError(
            f"The Live API aborted the session (1008: {reason}). This is reported when "
            "realtime audio is sent while a BLOCKING tool call is unanswered: hold or drop "
            "microphone audio until the answer is sent, or make the tool NON_BLOCKING.",
            code=1008,
            reason=reason,
        )
    else:
        label = "policy_violation"
        error = PolicyViolationError(
            f"The Live API refused the session (1008: {reason or 'no reason'}). Check that the "
            "API key is valid and enabled for this model and that the setup is supported.",
            code=1008,
            reason=reason,
        )
    return CloseDecision("end", label, error)


_SIZE = re.compile(r"with (\d+) bytes")
_LIMIT = re.compile(r"limit of (\d+) bytes")


def frame_too_large(reason: str) -> FrameTooLargeError:
    """The error for a server frame over the client's ``max_size`` (websockets closed with 1009).

    websockets' reason reads like "frame with 5000000 bytes exceeds limit of 4194304 bytes"
    (without the size when the frame was compressed).
    """
    size = _SIZE.search(reason)
    limit = _LIMIT.search(reason)
    return FrameTooLargeError(
        f"The server sent a frame larger than this client accepts ({reason or 'over max_size'});"
        " the frame was lost and the session resumes. Raise max_size in the client's "
        "async_client_args (livebridge.client_args) if the service really sends frames this big.",
        size=int(size[1]) if size else None,
        limit=int(limit[1]) if limit else None,
    )


def reconnect_deadline(received_at: float, time_left: float, margin: float = 5.0) -> float:
    """When to start switching to a new socket after ``goAway`` (same clock as ``received_at``).

    The old socket stays usable until ``time_left`` runs out; the switch-over starts ``margin``
    seconds before that (at once when less time is left), leaving room to connect, finish the
    setup and send the answers still owed on the old socket.
    """
    return received_at + max(0.0, time_left - margin)


def keepalive_settings() -> dict[str, float]:
    """Websocket keepalive for ``websockets`` ``connect`` (``HttpOptions.async_client_args``).

    Ping every 20 s (the library default) but wait up to 60 s for the pong: Gemini pongs were
    measured at 8-30 s, so the default 20 s ping_timeout closes healthy sessions with
    1011 "keepalive ping timeout" (aicc2025/sip-to-ai#14, google/adk-python#3067).
    """
    return {"ping_interval": 20.0, "ping_timeout": 60.0}
