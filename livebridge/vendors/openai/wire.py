"""The OpenAI Realtime (GA) wire codec: server events decoded into one small msgspec struct, and
the client events livebridge sends.

Every server event decodes into one flat ``ServerEvent``: its ``type`` and the few fields the
protocol reads (unknown fields are ignored, absent ones are ``None``), so a new event type never
breaks the decoder and the protocol simply ignores it. A frame that is not a JSON object with a
string ``type``, or whose fields have the wrong types, raises ``MalformedMessageError`` and the
connection goes on. Encoders and decoders are built once; audio is base64-encoded by msgspec.

A string that is valid JSON but not valid Unicode (a lone UTF-16 surrogate escape) makes msgspec
refuse the whole frame; such a frame is read again by the standard library (``from_builtins``),
so that one call's bad arguments fail that call alone (the protocol reads ``arguments`` per
call) and every other string reaches the app mended (U+FFFD for each lone surrogate).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

import msgspec

from livebridge.calls import payloads
from livebridge.calls.call import Behavior, Outcome, Partial, Scheduling
from livebridge.errors import MalformedMessageError
from livebridge.protocol.transport import Audio, ClientItem, Frames, Signal, Text, ToolAnswers

#: The only PCM rate the GA API takes and sends (``audio/pcm``, 16-bit mono little-endian).
INPUT_RATE: Final = 24_000
OUTPUT_RATE: Final = 24_000


class Item(msgspec.Struct, omit_defaults=True):
    """A conversation item; livebridge reads ``function_call`` ones."""

    type: str | None = None
    id: str | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    status: str | None = None


class StatusDetails(msgspec.Struct, omit_defaults=True):
    type: str | None = None
    reason: str | None = None
    error: dict[str, Any] | None = None


class Response(msgspec.Struct, omit_defaults=True):
    """The response resource of ``response.created`` / ``response.done``."""

    id: str | None = None
    status: str | None = None
    status_details: StatusDetails | None = None
    output: list[Item] | None = None
    usage: dict[str, Any] | None = None


class ErrorDetail(msgspec.Struct, omit_defaults=True):
    type: str | None = None
    code: str | None = None
    message: str | None = None
    param: str | None = None
    event_id: str | None = None


class Session(msgspec.Struct, omit_defaults=True):
    id: str | None = None


class ServerEvent(msgspec.Struct, omit_defaults=True):
    """Any server event: ``type`` plus the fields livebridge reads from the events it handles."""

    type: str
    event_id: str | None = None
    response: Response | None = None
    response_id: str | None = None
    item: Item | None = None
    item_id: str | None = None
    output_index: int | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    delta: str | None = None
    text: str | None = None
    transcript: str | None = None
    error: ErrorDetail | None = None
    session: Session | None = None
    audio_start_ms: int | None = None


_decoder = msgspec.json.Decoder(ServerEvent)
_encoder = msgspec.json.Encoder()


def decode_server(data: bytes | str) -> ServerEvent:
    """One server frame; ``MalformedMessageError`` says what was wrong with it."""
    try:
        return _decoder.decode(data)
    except msgspec.DecodeError as exc:
        refused = exc
    try:  # msgspec takes no lone surrogate; the standard library reads them into str
        plain = json.loads(data)
    except (ValueError, RecursionError):
        raise MalformedMessageError(f"not an OpenAI Realtime event ({refused})") from None
    return from_builtins(plain)


def from_builtins(plain: Any, *, strict: bool = True) -> ServerEvent:
    """An event another JSON reader decoded (the standard library, the SDK's models) as a
    ``ServerEvent``; every string but a call's ``arguments`` is mended to valid Unicode."""
    try:
        return msgspec.convert(_mended(plain), ServerEvent, strict=strict)
    except (msgspec.ValidationError, RecursionError) as exc:
        raise MalformedMessageError(f"not an OpenAI Realtime event ({exc})") from None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _mended(value: Any) -> Any:
    """``value`` with each lone surrogate of its strings replaced by U+FFFD (a str holding one
    cannot be encoded, so it would fail whoever sends or prints it), ``arguments`` kept."""
    if isinstance(value, str):
        return value if value.isascii() else _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {key: item if key == "arguments" else _mended(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_mended(item) for item in value]
    return value


def encode(message: msgspec.Struct | dict[str, Any]) -> bytes:
    return _encoder.encode(message)


def to_builtins(event: ServerEvent) -> dict[str, Any]:
    """The event as plain JSON types (for logs and recordings)."""
    plain: dict[str, Any] = msgspec.to_builtins(event)
    return plain


# -- client events ------------------------------------------------------------------------------


class _Append(msgspec.Struct):
    audio: bytes  # msgspec writes standard base64
    type: str = "input_audio_buffer.append"


#: Ask the model to respond (after tool outputs, a text turn, a manual end of speech).
RESPONSE_CREATE: Final[dict[str, Any]] = {"type": "response.create"}
_RESPONSE_CREATE = encode(RESPONSE_CREATE)
_COMMIT = encode({"type": "input_audio_buffer.commit"})


def answer(
    answer: Outcome | Partial,
    *,
    behavior: Behavior = "BLOCKING",
    scheduling: Scheduling | None = None,
    streaming: bool = False,
    anonymous: bool = False,
) -> dict[str, Any]:
    """One call's answer: a ``conversation.item.create`` of a ``function_call_output`` whose
    ``output`` is the JSON text of the livebridge payload (``{"output": ...}`` or
    ``{"error": {...}}``, as ``adapters.openai`` sends). ``behavior``, ``scheduling`` and
    ``anonymous`` have no OpenAI counterpart (every call has a ``call_id``) and are ignored."""
    if isinstance(answer, Partial):
        raise ValueError(f"call {answer.call_id}: OpenAI Realtime takes one output per call")
    return {
        "type": "conversation.item.create",
        "item": {
            "type": "function_call_output",
            "call_id": answer.call_id,
            "output": payloads.json_text(answer.response),
        },
    }


def client_frames(item: ClientItem) -> list[bytes]:
    """The frames that carry ``item``, in order.

    Text is a user message followed by ``response.create`` (adding an item does not start a
    response). ``activity_end`` commits the audio buffer and asks for a response (manual turn
    detection); ``audio_stream_end`` commits it; ``activity_start`` needs no frame.
    """
    if isinstance(item, Audio):
        return [_encoder.encode(_Append(item.pcm))]
    if isinstance(item, Frames):
        return [_encoder.encode(message) for message in item.messages]
    if isinstance(item, Text):
        message = {
            "type": "conversation.item.create",
            "item": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": item.text}],
            },
        }
        return [_encoder.encode(message), _RESPONSE_CREATE]
    if isinstance(item, Signal):
        if item.kind == "activity_end":
            return [_COMMIT, _RESPONSE_CREATE]
        if item.kind == "audio_stream_end":
            return [_COMMIT]
        return []
    assert isinstance(item, ToolAnswers)
    raise TypeError("ToolAnswers is Gemini's toolResponse; OpenAI answers travel as Frames")


def client_kinds(item: ClientItem) -> list[str]:
    """The event types ``client_frames(item)`` sends (for metrics)."""
    if isinstance(item, Audio):
        return ["input_audio_buffer.append"]
    if isinstance(item, Frames):
        return [item.kind] * len(item.messages)
    if isinstance(item, Text):
        return ["conversation.item.create", "response.create"]
    if isinstance(item, Signal):
        if item.kind == "activity_end":
            return ["input_audio_buffer.commit", "response.create"]
        return ["input_audio_buffer.commit"] if item.kind == "audio_stream_end" else []
    return []
