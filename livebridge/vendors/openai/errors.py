"""What OpenAI Realtime's close codes and ``error`` events mean, as livebridge's errors.

Pure functions: a close code and reason become a ``resume.CloseDecision`` (there is no resumption
handle, so "resume" means a new, empty conversation), an ``error`` event becomes a
``ServiceReportedError`` whose message says what to do.
"""

from __future__ import annotations

from livebridge.errors import (
    ConnectionLostError,
    LiveSessionError,
    PolicyViolationError,
    ServerError,
    ServiceReportedError,
)
from livebridge.protocol import resume
from livebridge.vendors.openai import wire as openai_wire


def service_error(detail: openai_wire.ErrorDetail, hint: str = "") -> ServiceReportedError:
    """An ``error`` event as a clear error: what the service said, and what to do."""
    said = (detail.message or "no message").rstrip(". ")
    code = detail.code or detail.type or "error"
    hint = hint or _HINTS.get(detail.code or "", "")
    where = f" (parameter {detail.param})" if detail.param else ""
    return ServiceReportedError(
        f"OpenAI Realtime reported {code}{where}: {said}." + (f" {hint}" if hint else ""),
        type=detail.type,
        code=detail.code,
        param=detail.param,
    )


_HINTS: dict[str, str] = {
    "invalid_value": "Check the session config passed to LiveSession.connect.",
    "unknown_parameter": "Remove the field from the session config (GA shape, not beta).",
    "input_audio_buffer_commit_empty": "Send audio before ending the turn.",
    "session_expired": "The session reached its maximum length; open a new LiveSession.",
}


def classify_close(code: int | None, reason: str) -> resume.CloseDecision:
    """What to do when an OpenAI Realtime socket closes (there is nothing to resume).

    A drop (no close frame, 1001, 1006) or a server error (1011) reconnects to a new, empty
    conversation; a normal close (1000), a policy close (1008) or any other code ends the
    session with an error that says what happened.
    """
    said = reason or "no reason"
    lost = (
        " OpenAI Realtime cannot resume: livebridge opened a new connection, which starts an "
        "empty conversation (calls without an answer are orphaned)."
    )
    if code == 1000:
        return resume.CloseDecision("end", "closed", None)
    if code is None or code in (1001, 1006):
        error: LiveSessionError = ConnectionLostError(
            f"The connection to OpenAI Realtime was lost (close code {code}, {said}).{lost}",
            code=code,
            reason=reason,
        )
        return resume.CloseDecision("resume", "dropped", error)
    if code == 1011:
        error = ServerError(
            f"OpenAI Realtime failed on its side (1011: {said}).{lost}", code=code, reason=reason
        )
        return resume.CloseDecision("resume", "server_error", error)
    if code == 1009:
        return resume.CloseDecision("resume", "frame_too_large", resume.frame_too_large(reason))
    if code == 1008:
        error = PolicyViolationError(
            f"OpenAI Realtime refused the session (1008: {said}). Check the API key, the model "
            "name and the session config.",
            code=code,
            reason=reason,
        )
        return resume.CloseDecision("end", "policy_violation", error)
    error = LiveSessionError(
        f"OpenAI Realtime closed the session with code {code} ({said}). "
        + (
            "It refuses beta-shaped requests: use the GA session shape (session.type "
            "'realtime') and no OpenAI-Beta header."
            if "beta" in said.lower()
            else "Start a new session; report the code if it repeats."
        ),
        code=code,
        reason=reason,
    )
    return resume.CloseDecision("end", "unexpected_close", error)
