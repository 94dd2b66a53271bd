"""OpenAI Realtime (GA) events as the emulator reads and writes them, without I/O.

Client events decode into tagged ``msgspec`` structs (unknown fields are ignored, as new fields
must not break the emulator); a frame the service would refuse becomes an ``EventError``, which
the connection sends back as an ``error`` event (the service does not close for a bad event).
Server events are plain JSON objects built by ``event``; the objects they carry (items,
responses, the session) are built here so every event shows them alike. Shapes follow the
official ``openai`` SDK's ``types/realtime`` and OpenAI's realtime guides.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import string
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

#: The one PCM rate the GA API speaks, in and out.
AUDIO_RATE = 24_000
BETA_MESSAGE = (
    "The Realtime Beta API is no longer supported. Please use /v1/realtime for the GA API."
)

_ALPHABET = string.ascii_letters + string.digits


def new_id(prefix: str) -> str:
    """An id in the service's form: ``event_…``, ``resp_…``, ``item_…``, ``call_…``."""
    return f"{prefix}_{''.join(secrets.choice(_ALPHABET) for _ in range(20))}"


# client events -----------------------------------------------------------------------------------


class _Client(msgspec.Struct, tag_field="type", kw_only=True):
    event_id: str | None = None


class SessionUpdate(_Client, tag="session.update"):
    session: dict[str, Any]


class InputAudioBufferAppend(_Client, tag="input_audio_buffer.append"):
    audio: str


class InputAudioBufferCommit(_Client, tag="input_audio_buffer.commit"):
    pass


class InputAudioBufferClear(_Client, tag="input_audio_buffer.clear"):
    pass


class ContentPart(msgspec.Struct, kw_only=True):
    type: str | None = None
    text: str | None = None
    audio: str | None = None
    transcript: str | None = None


class Item(msgspec.Struct, kw_only=True):
    """Any conversation item a client may create (message, function_call, function_call_output)."""

    type: str
    id: str | None = None
    role: str | None = None
    content: list[ContentPart] | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    output: Any = None
    status: str | None = None


class ConversationItemCreate(_Client, tag="conversation.item.create"):
    item: Item
    previous_item_id: str | None = None


class ConversationItemTruncate(_Client, tag="conversation.item.truncate"):
    item_id: str
    content_index: int
    audio_end_ms: int


class ConversationItemDelete(_Client, tag="conversation.item.delete"):
    item_id: str


class ConversationItemRetrieve(_Client, tag="conversation.item.retrieve"):
    item_id: str


class ResponseCreate(_Client, tag="response.create"):
    response: dict[str, Any] | None = None

    @property
    def out_of_band(self) -> bool:
        """``response.conversation: "none"``: a response outside the default conversation,
        which may run beside the one in progress and adds nothing to the conversation."""
        return (self.response or {}).get("conversation") == "none"


class ResponseCancel(_Client, tag="response.cancel"):
    response_id: str | None = None


class OutputAudioBufferClear(_Client, tag="output_audio_buffer.clear"):
    pass


ClientEvent = (
    SessionUpdate
    | InputAudioBufferAppend
    | InputAudioBufferCommit
    | InputAudioBufferClear
    | ConversationItemCreate
    | ConversationItemTruncate
    | ConversationItemDelete
    | ConversationItemRetrieve
    | ResponseCreate
    | ResponseCancel
    | OutputAudioBufferClear
)
CLIENT_EVENT_TYPES = (
    "session.update",
    "input_audio_buffer.append",
    "input_audio_buffer.commit",
    "input_audio_buffer.clear",
    "conversation.item.create",
    "conversation.item.truncate",
    "conversation.item.delete",
    "conversation.item.retrieve",
    "response.create",
    "response.cancel",
    "output_audio_buffer.clear",
)


@dataclass(frozen=True, slots=True)
class EventError:
    """Why the service refuses a client event: the ``error`` object of its ``error`` event."""

    code: str
    message: str
    param: str | None = None
    type: str = "invalid_request_error"


def read_event(frame: str | bytes) -> tuple[dict[str, Any], ClientEvent | EventError]:
    """What to put in the transcript for ``frame``, and the event it carries or why not."""
    try:
        raw = json.loads(frame)
    except (ValueError, RecursionError):
        text = frame if isinstance(frame, str) else frame.decode("utf-8", "replace")
        message = "We could not parse the JSON body of your request. Send a JSON object."
        return {"invalid": text[:1000]}, EventError("invalid_json", message)
    if not isinstance(raw, dict):
        return {"invalid": raw}, EventError("invalid_json", "An event must be a JSON object.")
    kind = raw.get("type")
    if not isinstance(kind, str):
        return raw, EventError(
            "missing_required_parameter", "Missing required parameter: 'type'.", "type"
        )
    if kind not in CLIENT_EVENT_TYPES:
        supported = ", ".join(f"'{name}'" for name in CLIENT_EVENT_TYPES)
        text = f"Invalid value: '{kind}'. Supported values are: {supported}."
        return raw, EventError("invalid_value", text, "type")
    try:
        return raw, msgspec.convert(raw, ClientEvent)
    except msgspec.ValidationError as error:
        return raw, EventError("invalid_value", f"Invalid '{kind}' event: {error}")


def decode_audio(data: str) -> bytes | EventError:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return EventError(
            "invalid_value", "Invalid 'audio'. Expected base64-encoded audio.", "audio"
        )


# the session -------------------------------------------------------------------------------------


class AudioFormat(msgspec.Struct, kw_only=True):
    type: str = "audio/pcm"
    rate: int | None = None


class TurnDetection(msgspec.Struct, kw_only=True):
    type: Literal["server_vad", "semantic_vad"] = "server_vad"
    create_response: bool = True
    interrupt_response: bool = True
    silence_duration_ms: int | None = None


class AudioInput(msgspec.Struct, kw_only=True):
    format: AudioFormat | None = None
    transcription: dict[str, Any] | None = None
    turn_detection: TurnDetection | None = None


class AudioOutput(msgspec.Struct, kw_only=True):
    format: AudioFormat | None = None
    voice: Any = None


class Audio(msgspec.Struct, kw_only=True):
    input: AudioInput | None = None
    output: AudioOutput | None = None


class FunctionTool(msgspec.Struct, kw_only=True):
    type: str = "function"
    name: str | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None


class SessionConfig(msgspec.Struct, kw_only=True):
    """The parts of a realtime session the emulator acts on."""

    type: str | None = None
    model: str | None = None
    output_modalities: list[Literal["text", "audio"]] | None = None
    audio: Audio | None = None
    tools: list[FunctionTool] | None = None
    tool_choice: Any = None
    instructions: str | None = None
    parallel_tool_calls: bool | None = None


def default_session(model: str, session_id: str) -> dict[str, Any]:
    """The session the service starts with (``session.created``)."""
    pcm = {"type": "audio/pcm", "rate": AUDIO_RATE}
    return {
        "type": "realtime",
        "object": "realtime.session",
        "id": session_id,
        "model": model,
        "output_modalities": ["audio"],
        "instructions": "",
        "tools": [],
        "tool_choice": "auto",
        "max_output_tokens": "inf",
        "tracing": None,
        "prompt": None,
        "include": None,
        "audio": {
            "input": {
                "format": pcm,
                "transcription": None,
                "noise_reduction": None,
                "turn_detection": {
                    "type": "server_vad",
                    "threshold": 0.5,
                    "prefix_padding_ms": 300,
                    "silence_duration_ms": 500,
                    "idle_timeout_ms": None,
                    "create_response": True,
                    "interrupt_response": True,
                },
            },
            "output": {"format": pcm, "voice": "alloy", "speed": 1.0},
        },
    }


#: The fields of a realtime session a ``session.update`` may carry: the openai SDK's
#: ``RealtimeSessionCreateRequestParam`` (a strict schema: the service refuses any other with
#: ``unknown_parameter``), and the read-only ones the service itself sends in ``session.created``
#: (a client echoing them back is not refused here: no source says the service refuses them).
SESSION_FIELDS = frozenset(
    {
        "type",
        "audio",
        "include",
        "instructions",
        "max_output_tokens",
        "model",
        "output_modalities",
        "parallel_tool_calls",
        "prompt",
        "reasoning",
        "tool_choice",
        "tools",
        "tracing",
        "truncation",
        "object",
        "id",
        "expires_at",
    }
)


def merge_session(
    current: dict[str, Any], update: dict[str, Any]
) -> tuple[dict[str, Any], SessionConfig] | EventError:
    """Apply a ``session.update``: the fields given replace the current ones (objects merge,
    ``null`` clears). GA requires ``session.type`` ``"realtime"`` in every update, and refuses a
    field its session schema does not have (``unknown_parameter``)."""
    unknown = sorted(key for key in update if key not in SESSION_FIELDS)
    if unknown:
        param = f"session.{unknown[0]}"
        return EventError("unknown_parameter", f"Unknown parameter: '{param}'.", param)
    kind = update.get("type")
    if kind is None:
        return EventError(
            "missing_required_parameter",
            "Missing required parameter: 'session.type'.",
            "session.type",
        )
    if kind != "realtime":
        return EventError(
            "invalid_value",
            f"Invalid value: '{kind}'. This connection serves 'realtime' sessions.",
            "session.type",
        )
    merged = _merge(current, update)
    try:
        config = msgspec.convert(merged, SessionConfig)
    except msgspec.ValidationError as error:
        return EventError("invalid_value", f"Invalid session: {error}", "session")
    for index, tool in enumerate(config.tools or []):
        if tool.type == "function" and not tool.name:
            text = f"Missing required parameter: 'session.tools[{index}].name'."
            return EventError("missing_required_parameter", text, f"session.tools[{index}].name")
    return merged, config


def _merge(current: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    merged = dict(current)
    for key, value in update.items():
        old = merged.get(key)
        merged[key] = (
            _merge(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
        )
    return merged


# server events -----------------------------------------------------------------------------------


def event(kind: str, **fields: Any) -> dict[str, Any]:
    """One server event; ``event_id`` is filled in when it is sent."""
    return {"type": kind, **fields}


def frame_of(message: dict[str, Any]) -> str:
    """The text frame that carries a server event. A string that is not valid Unicode (a lone
    UTF-16 surrogate, which a scenario may send to test a client) goes as a JSON escape, as
    the service's own JSON encoder writes it."""
    try:
        return msgspec.json.encode(message).decode()
    except UnicodeEncodeError:
        return json.dumps(message, separators=(",", ":"))


def sent_copy(frame: str) -> dict[str, Any]:
    """What ``frame`` carries, as a transcript entry: the event as sent, never the live objects
    the emulator goes on changing (a response's output grows, an item's status moves on)."""
    try:
        copy: dict[str, Any] = msgspec.json.decode(frame)
    except msgspec.DecodeError:  # a lone surrogate escape
        copy = json.loads(frame)
    return copy


def error_event(error: EventError, client_event_id: str | None = None) -> dict[str, Any]:
    """The ``error`` event that refuses a client event (the session goes on)."""
    detail = {
        "type": error.type,
        "code": error.code,
        "message": error.message,
        "param": error.param,
        "event_id": client_event_id,
    }
    return event("error", error=detail)


def response_object(
    response_id: str,
    status: str,
    output: list[dict[str, Any]],
    modalities: list[str],
    *,
    reason: str | None = None,
    usage: dict[str, Any] | None = None,
    conversation_id: str | None = "conv_emulated",
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``response`` of ``response.created`` / ``response.done`` (``conversation_id`` None:
    an out-of-band response)."""
    details = None if status in ("in_progress", "completed") else {"type": status, "reason": reason}
    return {
        "object": "realtime.response",
        "id": response_id,
        "status": status,
        "status_details": details,
        "output": output,
        "conversation_id": conversation_id,
        "output_modalities": modalities,
        "max_output_tokens": "inf",
        "audio": {
            "output": {"format": {"type": "audio/pcm", "rate": AUDIO_RATE}, "voice": "alloy"}
        },
        "usage": usage,
        "metadata": metadata,
    }
