"""Response payloads: results and errors as JSON-ready dicts, within a size budget.

Every answer is ``{"output": value}`` or ``{"error": {...}}`` (DESIGN.md, the contract table).
A result whose JSON encoding exceeds the budget is cut to fit and marked
``"truncated": true, "original_bytes": N`` (N is the size of the whole encoded response):

- a string keeps its longest prefix that fits;
- a list keeps its longest prefix of items that fits;
- anything else (objects, numbers) becomes a string: the longest prefix of its JSON text.

A result holding NaN or an infinity has no JSON form (the service would read ``null``): it is
refused as ``UnserializableResult`` rather than silently changed.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

from livebridge.errors import UnserializableResult

_encode = msgspec.json.Encoder().encode
_to_builtins = msgspec.to_builtins

#: Largest ``toolResponse`` frame by default: the Live service closes a session (1007) on a
#: frame of about 1 MB, so stay clearly below it.
DEFAULT_MAX_FRAME_BYTES = 900_000

#: Longest error message sent to the model; longer ones are cut.
MAX_ERROR_MESSAGE = 1024


class Payload(msgspec.Struct, frozen=True, gc=False):
    """A response dict and its size on the wire (built once per call)."""

    response: dict[str, Any]
    result_bytes: int
    truncated: bool = False
    original_bytes: int | None = None


def output(value: Any, max_bytes: int) -> Payload:
    """``{"output": value}`` as plain JSON types, cut to ``max_bytes`` if needed.

    Raises ``UnserializableResult`` when ``value`` has no JSON form.
    """
    try:
        plain = _to_builtins(value, str_keys=True)
        response = {"output": plain}
        encoded = _encode(response)
    except (TypeError, ValueError, OverflowError, RecursionError, msgspec.EncodeError) as exc:
        raise UnserializableResult(f"{type(value).__name__}: {exc}") from exc
    if plain is not None and b"null" in encoded and _non_finite(plain):
        raise UnserializableResult(f"{type(value).__name__}: NaN or Infinity has no JSON form")
    size = len(encoded)
    if size <= max_bytes:
        return Payload(response, size)
    return _truncated(plain, size, max_bytes)


def shrink(response: dict[str, Any], max_bytes: int) -> Payload:
    """An ``{"output": ...}`` response cut to ``max_bytes``, to share a frame with others.

    A response cut before keeps the size of the whole original in ``original_bytes``.
    """
    size = len(_encode(response))
    if size <= max_bytes:
        return Payload(
            response, size, bool(response.get("truncated")), response.get("original_bytes")
        )
    original = response.get("original_bytes", size) if response.get("truncated") else size
    return _truncated(response["output"], original, max_bytes)


def _non_finite(plain: Any) -> bool:
    """Does ``plain`` (JSON types) hold a NaN or an infinity anywhere? Iterative: no depth limit."""
    stack = [plain]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if item != item or item in (math.inf, -math.inf):
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _truncated(plain: Any, original_bytes: int, max_bytes: int) -> Payload:
    if isinstance(plain, str | list):
        whole: str | list[Any] = plain
    else:
        whole = _encode(plain).decode()

    def response(keep: int) -> dict[str, Any]:
        return {"output": whole[:keep], "truncated": True, "original_bytes": original_bytes}

    low, high = 0, len(whole)  # invariant: response(low) fits, or low == 0
    while low < high:
        middle = (low + high + 1) // 2
        if len(_encode(response(middle))) <= max_bytes:
            low = middle
        else:
            high = middle - 1
    best = response(low)
    return Payload(best, len(_encode(best)), truncated=True, original_bytes=original_bytes)


def error(
    kind: str, message: str, *, retryable: bool | None = None, **extra: Any
) -> dict[str, Any]:
    """``{"error": {"type": kind, "message": message, ...}}``; ``retryable`` only when given."""
    if len(message) > MAX_ERROR_MESSAGE:
        message = message[: MAX_ERROR_MESSAGE - 1] + "…"
    body: dict[str, Any] = {"type": kind, "message": message}
    if retryable is not None:
        body["retryable"] = retryable
    body.update(extra)
    return {"error": body}


def encoded_size(response: dict[str, Any]) -> int:
    """Bytes of ``response`` as JSON (error payloads are always encodable)."""
    return len(_encode(response))


def json_text(value: Any) -> str:
    """``value`` as compact JSON text, for encoders that send strings."""
    return _encode(value).decode()
