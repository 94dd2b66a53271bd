"""What a recording (``livebridge.recording``) writes of a GPT-Live session's wire.

Server events are written as the session decoded them (``openai_live.wire``: the fields
livebridge reads), client events as they were sent, one line per frame. Audio is reduced to
its length unless kept: an input append's ``audio`` and an output delta's ``delta`` become
``audioBytes``. A backend call's ``arguments`` and the ``output`` answering it (JSON text on
this wire) pass through the redaction hook by the call's function name, which the writer
learns from the call as it passes.
"""

from __future__ import annotations

import json
from typing import Any, Final

import msgspec

from livebridge.protocol.base import Redact
from livebridge.protocol.encoding import b64decode
from livebridge.protocol.transport import ClientItem
from livebridge.vendors.openai_live import wire

#: The ``vendor`` a recording's header names for this wire.
NAME: Final = "gpt-live"
_AUDIO: Final = {"session.input_audio.append": "audio", "session.output_audio.delta": "delta"}


class GptLiveWire:
    """The recording codec of one GPT-Live session (it remembers each call's function)."""

    name = NAME

    def __init__(self) -> None:
        self._names: dict[str, str] = {}  # call id -> function name

    def server(self, message: wire.ServerEvent) -> dict[str, Any]:
        decoded: dict[str, Any] = msgspec.to_builtins(message)
        return decoded

    def client(self, item: ClientItem) -> list[dict[str, Any]]:
        return [json.loads(frame) for frame in wire.client_frames(item)]

    def scrub(self, message: dict[str, Any], *, keep_audio: bool, redact: Redact | None) -> None:
        """Reduce audio and redact calls and answers, in place."""
        field = _AUDIO.get(str(message.get("type")))
        if field is not None and not keep_audio and isinstance(message.get(field), str):
            message["audioBytes"] = len(b64decode(message.pop(field)))
        item = (message.get("event") or {}).get("item") or message.get("item")
        if not isinstance(item, dict):
            return
        if item.get("type") == "function_call" and isinstance(item.get("call_id"), str):
            self._names[item["call_id"]] = str(item.get("name"))
            if redact is not None:
                item["arguments"] = _redacted(redact, str(item.get("name")), item.get("arguments"))
        elif item.get("type") == "function_call_output" and redact is not None:
            name = self._names.get(str(item.get("call_id")), "")
            item["output"] = _redacted_answer(redact, name, item.get("output"))


def _redacted(redact: Redact, function: str, text: Any) -> str:
    """Arguments (JSON text of an object) through ``redact``."""
    try:
        value = json.loads(text) if isinstance(text, str) else text
        if not isinstance(value, dict):
            value = {"value": value}
        return json.dumps(redact(function, value), separators=(",", ":"))
    except Exception:  # a failing hook, or text that is not JSON, hides the value
        return json.dumps({"redaction_failed": True})


def _redacted_answer(redact: Redact, function: str, text: Any) -> str:
    """An answer (JSON text): its ``output`` or ``error`` object through ``redact``, as on
    every wire (an error's message can quote the arguments)."""
    try:
        body = json.loads(text) if isinstance(text, str) else text
        if isinstance(body, dict):
            for key in ("output", "error"):
                if isinstance(body.get(key), dict):
                    body[key] = redact(function, body[key])
        return json.dumps(body, separators=(",", ":"))
    except Exception:  # a failing hook, or text that is not JSON, hides the value
        return json.dumps({"redaction_failed": True})
