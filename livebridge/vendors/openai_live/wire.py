"""The GPT-Live wire codec: server events decoded into one small msgspec struct, and the client
events livebridge sends.

Every server event decodes into one flat ``ServerEvent`` (unknown fields ignored, absent ones
``None``), so a new event type never breaks the decoder. Responses events arrive only nested in
a ``response.event`` envelope; its ``event`` decodes into ``BackendEvent``, the few fields the
protocol reads. A frame that is not a JSON object with a string ``type`` raises
``MalformedMessageError`` and the connection goes on.

The backend's input budget is metered on what livebridge sends it: ``item_bytes`` is the size
of one ``response.item.create`` item as compact UTF-8 JSON, the measure the emulator meters too.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from livebridge.errors import MalformedMessageError
from livebridge.protocol.transport import Audio, ClientItem, Frames, Signal, Text, ToolAnswers

#: The PCM rate livebridge configures (``audio/pcm``, 16-bit mono little-endian).
INPUT_RATE: Final = 24_000


class BackendItem(msgspec.Struct, omit_defaults=True):
    """An output item of a backend response; livebridge reads ``function_call`` ones."""

    type: str | None = None
    id: str | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    status: str | None = None


class BackendResponse(msgspec.Struct, omit_defaults=True):
    """A lifecycle snapshot (``output`` is always empty on GPT-Live: never read for calls)."""

    id: str | None = None
    status: str | None = None
    error: dict[str, Any] | None = None
    incomplete_details: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None


class BackendEvent(msgspec.Struct, omit_defaults=True):
    """The Responses event inside a ``response.event`` envelope."""

    type: str
    response: BackendResponse | None = None
    item: BackendItem | None = None
    delta: str | None = None


class Delegation(msgspec.Struct, omit_defaults=True):
    id: str | None = None
    target: str | None = None
    response_id: str | None = None


class ErrorDetail(msgspec.Struct, omit_defaults=True):
    type: str | None = None
    code: str | None = None
    message: str | None = None
    param: str | None = None
    client_event_id: str | None = None


class DeclaredTool(msgspec.Struct, omit_defaults=True):
    type: str | None = None
    name: str | None = None


class BackendConfig(msgspec.Struct, omit_defaults=True):
    tools: list[DeclaredTool] | None = None


class SessionDelegation(msgspec.Struct, omit_defaults=True):
    type: str | None = None
    responses: BackendConfig | None = None


class Session(msgspec.Struct, omit_defaults=True):
    """The resolved session of ``session.started``: its id, and what an attached session
    checks (the delegation and its declared tools)."""

    id: str | None = None
    delegation: SessionDelegation | None = None


class ServerEvent(msgspec.Struct, omit_defaults=True):
    """Any server event: ``type`` plus the fields livebridge reads."""

    type: str
    event_id: str | None = None
    client_event_id: str | None = None
    session: Session | None = None
    delegation: Delegation | None = None
    delegation_id: str | None = None
    event: BackendEvent | None = None
    delta: str | None = None
    error: ErrorDetail | None = None
    reason: str | None = None
    offset_ms: int | None = None


_decoder = msgspec.json.Decoder(ServerEvent)
_encoder = msgspec.json.Encoder()


def decode_server(data: bytes | str) -> ServerEvent:
    """One server frame; ``MalformedMessageError`` says what was wrong with it."""
    try:
        return _decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise MalformedMessageError(f"not a GPT-Live event ({exc})") from None


def encode(message: dict[str, Any]) -> bytes:
    return _encoder.encode(message)


def output_item(call_id: str, output: str) -> dict[str, Any]:
    """The ``function_call_output`` item answering ``call_id``."""
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def user_message(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def item_bytes(item: dict[str, Any]) -> int:
    """What one item costs the backend's session budget: its compact UTF-8 JSON."""
    return len(_encoder.encode(item))


class _Append(msgspec.Struct):
    audio: bytes  # msgspec writes standard base64
    type: str = "session.input_audio.append"


def client_frames(item: ClientItem) -> list[bytes]:
    """The frames that carry ``item``, in order.

    Text is queued for the backend (``response.item.create`` of a user message); the
    ``response.create`` that starts work on it goes through the protocol's gate. Signals need
    no frame: GPT-Live has no commit and the model owns turn-taking.
    """
    if isinstance(item, Audio):
        return [_encoder.encode(_Append(item.pcm))]
    if isinstance(item, Frames):
        return [_encoder.encode(message) for message in item.messages]
    if isinstance(item, Text):
        return [_encoder.encode({"type": "response.item.create", "item": user_message(item.text)})]
    if isinstance(item, Signal):
        return []
    assert isinstance(item, ToolAnswers)
    raise TypeError("ToolAnswers is Gemini's toolResponse; GPT-Live answers travel as Frames")


def client_kinds(item: ClientItem) -> list[str]:
    """The event types ``client_frames(item)`` sends (for metrics)."""
    if isinstance(item, Audio):
        return ["session.input_audio.append"]
    if isinstance(item, Frames):
        return [item.kind] * len(item.messages)
    if isinstance(item, Text):
        return ["response.item.create"]
    return []
