"""The ``session.start`` session object for GPT-Live, checked before any socket opens.

The service's session schema is strict: a field it does not know is refused, and a session
that is refused never starts. So livebridge refuses the same things at connect, with a
``UsageError`` naming the field, rather than after a round trip: Realtime's fields
(``turn_detection``, ``tools`` at the top level, ``type``...), tools in both ``config`` and the
registry, an unknown delegation type. The registry's tools go into ``delegation.responses.tools``;
with tools and no delegation, Responses delegation is chosen with ``DEFAULT_BACKEND_MODEL``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from livebridge.calls.tools import ToolRegistry
from livebridge.errors import UsageError
from livebridge.vendors.openai.declarations import declarations
from livebridge.vendors.openai_live import wire

#: The Responses model a session with tools delegates to unless ``config`` names one
#: (the model of OpenAI's delegation guide).
DEFAULT_BACKEND_MODEL: Final = "gpt-5.6-luna"

#: The fields the service's strict schema knows, by where they stand (the emulator refuses
#: the others as the service does).
SESSION_FIELDS: Final[dict[str, frozenset[str]]] = {
    "session": frozenset(
        {
            "model",
            "instructions",
            "input",
            "audio",
            "delegation",
            "store",
            "safety_identifier",
            "triggers",
            "client",
            "wake_policy",
            "idle_timeout_s",
        }
    ),
    "session.audio": frozenset({"format", "output"}),
    "session.delegation": frozenset({"type", "responses", "acknowledgement_delay_ms"}),
    "session.delegation.responses": frozenset(
        {
            "model",
            "instructions",
            "tools",
            "tool_choice",
            "parallel_tool_calls",
            "max_output_tokens",
            "reasoning",
            "text",
            "service_tier",
        }
    ),
}
_WHERE: Final = {
    "turn_detection": " (GPT-Live has no turn detection: the model owns turn-taking)",
    "tools": " (the voice model has no tools: they go in delegation.responses.tools)",
    "type": " (Realtime's session type; GPT-Live sessions have none)",
    "temperature": " (not accepted for a delegated model)",
}


def _unknown(given: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    for key in given:
        if key not in allowed:
            raise UsageError(
                f"GPT-Live refuses the session field {where}{key}{_WHERE.get(key, '')}: its "
                f"session schema is strict; the fields there are {', '.join(sorted(allowed))}"
            )


def session_config(
    config: Mapping[str, Any] | None,
    tools: ToolRegistry,
    *,
    model: str,
    parallel_tool_calls: bool = True,
) -> dict[str, Any]:
    """The ``session.start`` session: ``config`` checked against the strict schema, ``model``
    set, the registry's functions added to ``delegation.responses.tools``."""
    if config is not None and not isinstance(config, Mapping):
        raise UsageError(
            f"GPT-Live takes config as a dict (the session of session.start), not "
            f"{type(config).__name__}"
        )
    session: dict[str, Any] = {key: value for key, value in (config or {}).items()}
    _unknown(session, SESSION_FIELDS["session"], "")
    if session.setdefault("model", model) != model:
        raise UsageError(
            f"config names model {session['model']!r} but the session connects {model!r}: "
            "give the model once, as LiveSession.connect(model=...)"
        )
    audio = dict(session.get("audio") or {})
    _unknown(audio, SESSION_FIELDS["session.audio"], "audio.")
    fmt = dict(audio.get("format") or {"type": "audio/pcm", "rate": wire.INPUT_RATE})
    if fmt.get("type") == "audio/pcm" and fmt.get("rate", wire.INPUT_RATE) == wire.INPUT_RATE:
        fmt["rate"] = wire.INPUT_RATE
    elif fmt.get("type") == "audio/pcmu" and fmt.get("rate", 8000) == 8000:
        fmt["rate"] = 8000
    else:
        raise UsageError(
            f"audio.format must be audio/pcm at 24000 Hz or audio/pcmu at 8000 Hz (got {fmt!r}): "
            "livebridge sends and delivers 16-bit PCM at 24 kHz, or μ-law"
        )
    audio["format"] = fmt
    session["audio"] = audio
    functions = declarations(tools)
    delegation = session.get("delegation")
    if delegation is None:
        if not functions:
            return session
        delegation = {"type": "responses"}
    if not isinstance(delegation, Mapping):
        raise UsageError(f"delegation must be a dict, not {type(delegation).__name__}")
    delegation = dict(delegation)
    _unknown(delegation, SESSION_FIELDS["session.delegation"], "delegation.")
    kind = delegation.get("type")
    if kind == "client":
        if functions:
            raise UsageError(
                "delegation type 'client' runs no tools of the registry (the app answers each "
                "delegation itself): pass an empty registry, or use delegation type 'responses'"
            )
        session["delegation"] = delegation
        return session
    if kind != "responses":
        raise UsageError(
            f"unknown delegation type {kind!r}: GPT-Live sessions in livebridge delegate to "
            "'responses' (tools run by livebridge) or 'client'"
        )
    responses = dict(delegation.get("responses") or {})
    _unknown(responses, SESSION_FIELDS["session.delegation.responses"], "delegation.responses.")
    if responses.get("tools") and functions:
        names = ", ".join(
            str(tool.get("name", tool.get("type"))) for tool in responses["tools"] if tool
        )
        raise UsageError(
            f"tools are given twice: in config (delegation.responses.tools: {names}) and in "
            "the registry; declare them in the registry only, which answers each call once"
        )
    responses.setdefault("model", DEFAULT_BACKEND_MODEL)
    if not isinstance(responses["model"], str) or not responses["model"]:
        raise UsageError("delegation.responses.model must name the backend's Responses model")
    if functions:
        responses["tools"] = functions
        if parallel_tool_calls:
            responses.setdefault("parallel_tool_calls", True)
    delegation["responses"] = responses
    session["delegation"] = delegation
    return session
