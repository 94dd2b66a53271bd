"""The Gemini Live messages, typed: what a client sends and what the server sends, as msgspec
structs (camelCase on the wire, defaults omitted). ``livebridge.vendors.gemini.wire`` encodes and
decodes them and re-exports every name here.
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import attrgetter, is_not
from typing import Any, Final, Literal, get_args

import msgspec

Scheduling = Literal["SCHEDULING_UNSPECIFIED", "SILENT", "WHEN_IDLE", "INTERRUPT"]


class _Wire(msgspec.Struct, rename="camel", omit_defaults=True):
    """Base of every message: camelCase on the wire, defaults omitted, unknown fields ignored."""


class _Strict(msgspec.Struct, rename="camel", omit_defaults=True, forbid_unknown_fields=True):
    """Base of client messages checked field by field, like the real service does."""


# Shared content -------------------------------------------------------------------------------


class Blob(_Wire):
    """Inline bytes; ``data`` stays base64 text (standard or URL-safe), see ``b64decode``."""

    mime_type: str | None = None
    data: str = ""


class FunctionCall(_Wire):
    """Typed loosely on purpose: one call with a bad ``id``, ``name`` or ``args`` must not stop
    the frame (and the calls beside it) from decoding. The session checks each call."""

    id: Any = None
    name: Any = ""
    args: Any = None


class FunctionResponse(_Strict):
    id: str | None = None
    name: str | None = None
    response: dict[str, Any] | None = None
    will_continue: bool | None = None
    scheduling: Scheduling | None = None
    parts: list[dict[str, Any]] | None = None


class Part(_Wire):
    text: str | None = None
    inline_data: Blob | None = None
    function_call: FunctionCall | None = None
    function_response: dict[str, Any] | None = None
    thought: bool | None = None


class Content(_Wire):
    parts: list[Part] = []
    role: str | None = None


# Client -> server ------------------------------------------------------------------------------


class FunctionDeclaration(_Wire):
    name: str = ""
    description: str | None = None
    behavior: str | None = None
    parameters: dict[str, Any] | None = None
    parameters_json_schema: Any = None
    response: dict[str, Any] | None = None
    response_json_schema: Any = None


class Tool(_Wire):
    function_declarations: list[FunctionDeclaration] | None = None


class ThinkingConfig(_Wire):
    thinking_level: str | None = None
    thinking_budget: int | None = None
    include_thoughts: bool | None = None


class GenerationConfig(_Wire):
    response_modalities: list[str] | None = None
    thinking_config: ThinkingConfig | None = None


class HistoryConfig(_Wire):
    initial_history_in_client_content: bool | None = None


class SessionResumptionConfig(_Wire):
    handle: str | None = None
    transparent: bool | None = None


class AutomaticActivityDetection(_Wire):
    disabled: bool | None = None
    silence_duration_ms: int | None = None


class RealtimeInputConfig(_Wire):
    automatic_activity_detection: AutomaticActivityDetection | None = None
    activity_handling: str | None = None
    turn_coverage: str | None = None


class Setup(_Wire):
    model: str = ""
    generation_config: GenerationConfig | None = None
    system_instruction: Content | None = None
    tools: list[Tool] | None = None
    session_resumption: SessionResumptionConfig | None = None
    input_audio_transcription: dict[str, Any] | None = None
    output_audio_transcription: dict[str, Any] | None = None
    realtime_input_config: RealtimeInputConfig | None = None
    context_window_compression: dict[str, Any] | None = None
    response_modalities: list[str] | None = None
    history_config: HistoryConfig | None = None


class ClientContent(_Strict):
    turns: list[Content] | None = None
    turn_complete: bool | None = None


class ActivityMarker(_Wire):
    """``activityStart`` / ``activityEnd``: an empty object."""


class RealtimeInput(_Strict):
    audio: Blob | None = None
    video: Blob | None = None
    text: str | None = None
    activity_start: ActivityMarker | None = None
    activity_end: ActivityMarker | None = None
    audio_stream_end: bool | None = None
    media_chunks: list[Blob] | None = None


class ToolResponse(_Strict):
    function_responses: list[FunctionResponse] = []


class ContextUpdateTools(_Wire):
    tools: list[Tool] = []


class ContextUpdate(_Wire):
    system_instruction: Content | None = None
    tools: ContextUpdateTools | None = None


class ClientMessage(_Strict):
    """One client frame: exactly one field is set."""

    setup: Setup | None = None
    client_content: ClientContent | None = None
    realtime_input: RealtimeInput | None = None
    tool_response: ToolResponse | None = None
    context_update: ContextUpdate | None = None


# Server -> client ------------------------------------------------------------------------------


class SetupComplete(_Wire):
    session_id: str | None = None


class Transcription(_Wire):
    text: str | None = None
    finished: bool | None = None


class ServerContent(_Wire):
    model_turn: Content | None = None
    generation_complete: bool | None = None
    turn_complete: bool | None = None
    interrupted: bool | None = None
    grounding_metadata: dict[str, Any] | None = None
    input_transcription: Transcription | None = None
    output_transcription: Transcription | None = None
    interim_input_transcription: Transcription | None = None
    url_context_metadata: dict[str, Any] | None = None
    turn_complete_reason: str | None = None
    waiting_for_input: bool | None = None
    interaction_status: str | None = None


class ToolCall(_Wire):
    function_calls: list[FunctionCall] = []


class ToolCallCancellation(_Wire):
    ids: list[str] = []


class ModalityTokenCount(_Wire):
    modality: str | None = None
    token_count: int | None = None


class UsageMetadata(_Wire):
    prompt_token_count: int | None = None
    cached_content_token_count: int | None = None
    response_token_count: int | None = None
    tool_use_prompt_token_count: int | None = None
    thoughts_token_count: int | None = None
    total_token_count: int | None = None
    prompt_tokens_details: list[ModalityTokenCount] | None = None
    response_tokens_details: list[ModalityTokenCount] | None = None


class GoAway(_Wire):
    time_left: str | None = None


class SessionResumptionUpdate(_Wire):
    new_handle: str | None = None
    resumable: bool | None = None
    last_consumed_client_message_index: int | None = None


class VoiceActivityDetectionSignal(_Wire):
    vad_signal_type: str | None = None


class VoiceActivity(_Wire):
    type: str | None = None


class ServerMessage(_Wire):
    """One server frame; several fields may be set at once (e.g. ``turnComplete`` + usage)."""

    setup_complete: SetupComplete | None = None
    server_content: ServerContent | None = None
    tool_call: ToolCall | None = None
    tool_call_cancellation: ToolCallCancellation | None = None
    usage_metadata: UsageMetadata | None = None
    go_away: GoAway | None = None
    session_resumption_update: SessionResumptionUpdate | None = None
    voice_activity_detection_signal: VoiceActivityDetectionSignal | None = None
    voice_activity: VoiceActivity | None = None


#: The top-level fields of a server message, in the order a session handles them (a handle
#: issued in a frame counts before that frame's ``goAway``). One name per ``ServerMessage`` field.
ServerKind = Literal[
    "setupComplete",
    "serverContent",
    "usageMetadata",
    "toolCall",
    "toolCallCancellation",
    "sessionResumptionUpdate",
    "goAway",
    "voiceActivityDetectionSignal",
    "voiceActivity",
]
SERVER_KINDS: Final[tuple[ServerKind, ...]] = get_args(ServerKind)


def server_kinds(message: ServerMessage) -> tuple[ServerKind, ...]:
    """The kinds of the fields set in ``message``, in ``SERVER_KINDS`` order (this runs for
    every frame: benchmarks/PROFILE.md, Hot core)."""
    return tuple(compress(SERVER_KINDS, map(is_not, _server_fields(message), repeat(None))))


#: The fields of ``ServerMessage`` in ``SERVER_KINDS`` order, read in one C call.
_FIELD_OF_KIND = dict(
    zip(ServerMessage.__struct_encode_fields__, ServerMessage.__struct_fields__, strict=True)
)
_server_fields = attrgetter(*(_FIELD_OF_KIND[kind] for kind in SERVER_KINDS))
