"""The strict ``session.start`` schema of GPT-Live, judged without I/O.

The service refuses a field it does not know (``unknown_parameter``, naming it in ``param``),
a delegation type it does not have, and a Responses delegation without its model; what it
accepts comes back resolved, with its defaults filled in.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from livebridge.vendors.openai_live.config import SESSION_FIELDS

#: The client events the service supports (listed when another type arrives).
CLIENT_EVENTS: Final = (
    "session.start",
    "session.update",
    "session.close",
    "session.input_audio.append",
    "session.input_audio.mute",
    "session.input_audio.unmute",
    "session.instructions.append",
    "session.thinking.append",
    "session.commentary.append",
    "response.item.create",
    "response.create",
)

#: What a sideband may send: the same commands, but never ``session.start`` (the session is
#: running) nor input audio (it goes through the primary transport only).
SIDEBAND_EVENTS: Final = tuple(
    e for e in CLIENT_EVENTS if e not in ("session.start", "session.input_audio.append")
)

_FORMATS: Final = {
    ("audio/pcm", 16000),
    ("audio/pcm", 24000),
    ("audio/pcmu", 8000),
    ("audio/pcma", 8000),
}

_REFUSED_VOICES: Final = frozenset({"fable", "nova", "onyx"})


class Refusal(NamedTuple):
    code: str
    message: str
    param: str | None = None


def _check(value: Any, path: str) -> Refusal | None:
    if not isinstance(value, dict):
        return Refusal("invalid_type", f"Invalid type for '{path}': expected an object.", path)
    for key in value:
        if key not in SESSION_FIELDS[path]:
            return Refusal(
                "unknown_parameter", f"Unknown parameter: '{path}.{key}'.", f"{path}.{key}"
            )
    return None


def resolve(session: Any) -> dict[str, Any] | Refusal:
    """The resolved session of a ``session.start``, or why it is refused."""
    refusal = _check(session, "session")
    if refusal is not None:
        return refusal
    if not isinstance(session.get("model"), str) or not session["model"]:
        return Refusal(
            "missing_required_parameter",
            "Missing required parameter: 'session.model'.",
            "session.model",
        )
    audio = session.get("audio") or {}
    if (refusal := _check(audio, "session.audio")) is not None:
        return refusal
    fmt = audio.get("format") or {"type": "audio/pcm", "rate": 24000}
    if (
        fmt.get("type"),
        fmt.get("rate", 8000 if fmt.get("type") != "audio/pcm" else 24000),
    ) not in _FORMATS:
        return Refusal("invalid_value", f"Invalid audio format: {fmt!r}.", "session.audio.format")
    voice = (audio.get("output") or {}).get("voice")
    if voice in _REFUSED_VOICES:  # seen refused in probing (GPT_LIVE.md §1.7)
        return Refusal(
            "forbidden", f"Voice '{voice}' is not supported.", "session.audio.output.voice"
        )
    delegation = session.get("delegation") or {"type": "client"}
    if (refusal := _check(delegation, "session.delegation")) is not None:
        return refusal
    kind = delegation.get("type")
    if kind not in ("client", "responses", "decisions"):
        return Refusal(
            "invalid_value",
            f"Invalid value: '{kind}'. Supported values are: 'client', 'responses' and "
            "'decisions'.",
            "session.delegation.type",
        )
    if kind == "responses":
        responses = delegation.get("responses")
        if responses is None:
            return Refusal(
                "missing_required_parameter",
                "Missing required parameter: 'delegation.responses'.",
                "session.delegation.responses",
            )
        if (refusal := _check(responses, "session.delegation.responses")) is not None:
            return refusal
        if not responses.get("model"):
            return Refusal(
                "missing_required_parameter",
                "Missing required parameter: 'delegation.responses.model'.",
                "session.delegation.responses.model",
            )
    resolved = {
        "instructions": "",
        "input": [],
        "store": False,
        **session,
        "audio": {"format": fmt, "output": audio.get("output") or {"voice": "marin"}},
        "delegation": delegation,
        "status": "active",
    }
    return resolved
