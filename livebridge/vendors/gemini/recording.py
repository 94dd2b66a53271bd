"""What a recording (``livebridge.recording``) writes of a Gemini Live session's wire.

The format's own: camelCase messages, server messages as the session decoded them, client
messages as they were sent. Audio blobs are reduced to their length unless kept; tool call
arguments and the answers to them pass through the redaction hook by function name, and a hook
that fails hides the value rather than leaking it.
"""

from __future__ import annotations

import json
from typing import Any

from livebridge.protocol.base import Redact
from livebridge.protocol.encoding import b64decode
from livebridge.protocol.transport import ClientItem
from livebridge.vendors.gemini import wire
from livebridge.vendors.gemini.client_frames import encode_client


class GeminiWire:
    """Gemini Live's recording codec: the format's own, camelCase messages."""

    name = "gemini"

    def server(self, message: wire.ServerMessage) -> dict[str, Any]:
        return wire.to_builtins(message)

    def client(self, item: ClientItem) -> list[dict[str, Any]]:
        return [json.loads(encode_client(item))]

    def scrub(self, message: dict[str, Any], *, keep_audio: bool, redact: Redact | None) -> None:
        if not keep_audio:
            _reduce_audio(message)
        if redact is not None:
            _redact_calls(message, redact)


def _reduce_audio(value: Any) -> None:
    """Replace each audio blob's base64 ``data`` by ``dataBytes`` (its length), in place."""
    if isinstance(value, dict):
        for key in ("inlineData", "audio"):
            blob = value.get(key)
            if isinstance(blob, dict) and isinstance(blob.get("data"), str):
                blob["dataBytes"] = len(b64decode(blob.pop("data")))
        for item in value.values():
            _reduce_audio(item)
    elif isinstance(value, list):
        for item in value:
            _reduce_audio(item)


def _redact_calls(message: dict[str, Any], redact: Redact) -> None:
    """Pass tool call arguments and tool results through ``redact``, in place."""
    calls = list((message.get("toolCall") or {}).get("functionCalls") or [])
    for part in ((message.get("serverContent") or {}).get("modelTurn") or {}).get("parts") or []:
        if isinstance(part, dict) and isinstance(part.get("functionCall"), dict):
            calls.append(part["functionCall"])
    for call in calls:
        if isinstance(call, dict) and isinstance(call.get("args"), dict):
            call["args"] = _redacted(redact, str(call.get("name")), call["args"])
    responses = (message.get("toolResponse") or {}).get("functionResponses") or []
    for response in responses:
        body = response.get("response") if isinstance(response, dict) else None
        for key in ("output", "error"):  # an error's message can quote the arguments
            if isinstance(body, dict) and isinstance(body.get(key), dict):
                body[key] = _redacted(redact, str(response.get("name")), body[key])


def _redacted(redact: Redact, function: str, value: dict[str, Any]) -> dict[str, Any]:
    try:
        return redact(function, value)
    except Exception:  # a failing hook hides the value rather than leaking it
        return {"redaction_failed": True}
