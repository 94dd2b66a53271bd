"""The Gemini Live wire codec: typed messages in both directions, encoded and decoded with msgspec.

Server messages are decoded leniently (unknown fields ignored, proto3 JSON strings such as
``"resumable": "true"`` coerced), client messages strictly, so an unknown field is reported the way
the real service reports it. Client JSON may mix snake_case and lowerCamel field names
(``normalize_keys``); user data (``args``, ``response``, JSON schemas, ``labels``) is never touched.
Server frames in snake_case (an SDK model re-serialised) decode like camelCase ones. A frame
nested too deep to decode has its deepest values replaced by ``TOO_DEEP`` instead of being lost,
so one absurd ``args`` cannot sink the calls beside it. Encoders and decoders are built once; use
the module-level functions. The small parsers every Live component shares (``parse_duration``,
``audio_rate``, ``camel``) live here too. The message types are ``messages``'s, re-exported here.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Final

import msgspec

from livebridge.errors import WireError
from livebridge.vendors.gemini.messages import *  # noqa: F403 (the message types are this module's too)
from livebridge.vendors.gemini.messages import (
    ClientMessage,
    ServerMessage,
)

# Codec -----------------------------------------------------------------------------------------

_encoder = msgspec.json.Encoder()
_server_decoder = msgspec.json.Decoder(ServerMessage, strict=False)
_any_decoder = msgspec.json.Decoder()

#: Keys whose values are user data: their contents keep their casing.
_OPAQUE_KEYS = frozenset(
    {
        "args",
        "response",
        "properties",
        "labels",
        "parametersJsonSchema",
        "responseJsonSchema",
        "structValue",
        "default",
        "example",
    }
)


def encode(message: msgspec.Struct | dict[str, Any]) -> bytes:
    """Encode any wire message (Struct or plain dict) to compact JSON bytes."""
    return _encoder.encode(message)


#: Replaces every value nested deeper than ``MAX_DEPTH`` in a server frame.
TOO_DEEP: Final = "<value nested too deep to decode>"
#: Nesting kept when a frame is too deep for the decoder (it stops near 1,000 levels on Python
#: 3.11, near 10,000 on 3.13).
MAX_DEPTH: Final = 256

_EMPTY_SERVER_MESSAGE = ServerMessage()


def decode_server(data: bytes | str) -> ServerMessage:
    """Decode a server frame (lenient: unknown fields ignored, proto3 strings coerced).

    camelCase is what the service sends; a frame in snake_case is decoded too. Values nested
    deeper than ``MAX_DEPTH`` become ``TOO_DEEP``, and a call whose ``args`` held such a value
    gets ``args=TOO_DEEP`` (not an object, so it is rejected rather than run). Raises
    ``msgspec.DecodeError`` (a ``ValueError``) for a frame that is not a JSON object of the
    right shape.
    """
    try:
        message = _server_decoder.decode(data)
    except RecursionError:
        raw = data.encode() if isinstance(data, str) else bytes(data)
        message = _server_decoder.decode(_clip_depth(raw, MAX_DEPTH))
        _mark_clipped_calls(message)
    if message == _EMPTY_SERVER_MESSAGE:
        return _decode_snake(data)
    return message


def _mark_clipped_calls(message: ServerMessage) -> None:
    calls = list(message.tool_call.function_calls) if message.tool_call else []
    if message.server_content is not None and message.server_content.model_turn is not None:
        parts = message.server_content.model_turn.parts
        calls += [part.function_call for part in parts if part.function_call is not None]
    for call in calls:
        if _holds_too_deep(call.args):
            call.args = TOO_DEEP


def _holds_too_deep(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_holds_too_deep(item) for item in value.values())
    if isinstance(value, list):
        return any(_holds_too_deep(item) for item in value)
    return isinstance(value, str) and value == TOO_DEEP


def _decode_snake(data: bytes | str) -> ServerMessage:
    try:
        raw = _any_decoder.decode(data)
    except RecursionError:
        as_bytes = data.encode() if isinstance(data, str) else bytes(data)
        raw = _any_decoder.decode(_clip_depth(as_bytes, MAX_DEPTH))
    if not isinstance(raw, dict) or not raw:
        return _EMPTY_SERVER_MESSAGE
    message = msgspec.convert(normalize_keys(raw), ServerMessage, strict=False)
    _mark_clipped_calls(message)
    return message


def _clip_depth(data: bytes, limit: int) -> bytes:
    """``data`` with every JSON value opened deeper than ``limit`` replaced by ``TOO_DEEP``.

    A linear scan without recursion; only used for frames the decoder refused as too deep.
    """
    out = bytearray()
    depth = 0
    start = 0  # the first byte not copied to ``out`` yet
    skipping = -1  # the depth of the value being replaced, or -1
    in_string = escaped = False
    for index, byte in enumerate(data):
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
            continue
        if byte == 0x22:
            in_string = True
        elif byte in b"[{":
            depth += 1
            if depth > limit and skipping < 0:
                out += data[start:index]
                out += _encoder.encode(TOO_DEEP)
                skipping = depth
        elif byte in b"]}":
            if depth == skipping:
                skipping = -1
                start = index + 1
            depth -= 1
    if skipping < 0:
        out += data[start:]
    return bytes(out)


def to_builtins(message: msgspec.Struct) -> dict[str, Any]:
    """The JSON object a Struct encodes to (camelCase keys, defaults omitted)."""
    result: dict[str, Any] = msgspec.to_builtins(message)
    return result


_DURATION = re.compile(r"(-)?(\d+)(?:\.(\d{1,9}))?s")


def parse_duration(text: str) -> float:
    """Seconds in a proto3 JSON Duration such as ``"50s"``, ``"1.5s"`` or ``"0.250s"``."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not a duration: {text!r} (a protobuf Duration, like '50s' or '1.5s')")
    sign, whole, fraction = match.groups()
    seconds = int(whole) + (int(fraction) / 10 ** len(fraction) if fraction else 0.0)
    return -seconds if sign else seconds


#: The sample rate of audio whose mime type names none (the service's output rate).
DEFAULT_AUDIO_RATE: Final = 24_000


@lru_cache(maxsize=64)  # a server sending ever new mime types cannot grow it
def audio_rate(mime_type: str | None, default: int = DEFAULT_AUDIO_RATE) -> int:
    """The ``rate=`` of an audio mime type such as ``audio/pcm;rate=16000``, else ``default``."""
    for piece in (mime_type or "").split(";"):
        key, _, value = piece.strip().partition("=")
        if key.strip().lower() == "rate" and value.strip().isdigit():
            return int(value.strip())
    return default


@lru_cache(maxsize=1024)
def camel(name: str) -> str:
    """``function_responses`` -> ``functionResponses``; camelCase names are returned unchanged."""
    if "_" not in name:
        return name
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


@lru_cache(maxsize=1024)
def snake(name: str) -> str:
    """``functionResponses`` -> ``function_responses`` (how the service names fields in errors)."""
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def normalize_keys(value: Any) -> Any:
    """Rename every field name to lowerCamel, leaving user data (``_OPAQUE_KEYS``) untouched."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = camel(key) if isinstance(key, str) else key
            out[name] = item if name in _OPAQUE_KEYS else normalize_keys(item)
        return out
    if isinstance(value, list):
        return [normalize_keys(item) for item in value]
    return value


def decode_client_json(data: bytes | str) -> dict[str, Any]:
    """Parse a client frame into a dict with normalised field names, or raise ``WireError``."""
    try:
        raw = _any_decoder.decode(data)
    except msgspec.DecodeError:
        raise WireError("Invalid JSON payload received. Unexpected token.") from None
    if not isinstance(raw, dict):
        raise WireError("Invalid JSON payload received. Expected an object.")
    normalized: dict[str, Any] = normalize_keys(raw)
    return normalized


def convert_client(message: dict[str, Any]) -> ClientMessage:
    """Type-check a normalised client message, raising ``WireError`` with the service's wording."""
    try:
        return msgspec.convert(message, ClientMessage, strict=False)
    except msgspec.ValidationError as exc:
        raise WireError(_service_reason(str(exc))) from None


def decode_client(data: bytes | str) -> ClientMessage:
    """Parse and type-check one client frame in either casing."""
    return convert_client(decode_client_json(data))


_UNKNOWN = re.compile(
    r"Object contains unknown field `(?P<name>[^`]+)`(?: - at `\$(?P<at>[^`]*)`)?"
)
_AT = re.compile(r" - at `\$(?P<at>[^`]*)`")


def _proto_path(path: str) -> str:
    """``.toolResponse.functionResponses[0]`` -> ``tool_response.function_responses[0]``."""
    return re.sub(r"[A-Za-z]+", lambda m: snake(m.group(0)), path.lstrip("."))


def _service_reason(detail: str) -> str:
    unknown = _UNKNOWN.match(detail)
    if unknown:
        name = unknown.group("name")
        at = unknown.group("at")
        where = f" at '{_proto_path(at)}'" if at else ""
        return f'Invalid JSON payload received. Unknown name "{name}"{where}: Cannot find field.'
    at_match = _AT.search(detail)
    message = _AT.sub("", detail)
    if at_match:
        return (
            f"Invalid JSON payload received. Invalid value at '{_proto_path(at_match['at'])}': "
            f"{message}"
        )
    return f"Invalid JSON payload received. {message}"
