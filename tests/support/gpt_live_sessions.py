"""Driving a ``LiveSession`` on GPT-Live against the emulator's GPT-Live side."""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager
from typing import Any, cast

import openai

import livebridge
from livebridge import LiveSession
from livebridge.emulator import Emulator

MODEL = "gpt-live-1.1"


def open_live(
    emu: Emulator,
    tools: livebridge.ToolRegistry,
    config: dict[str, Any] | None = None,
    **settings: Any,
) -> AbstractAsyncContextManager[LiveSession]:
    return LiveSession.connect(
        emu.client(),
        model=MODEL,
        tools=tools,
        config=config or {"instructions": "Be brief."},
        **settings,
    )


def live_client(emu: Emulator) -> openai.AsyncOpenAI:
    """``emu.client()``: on a GPT-Live emulator, an ``openai.AsyncOpenAI`` that trusts it."""
    return cast(openai.AsyncOpenAI, emu.client())


def sent(emu: Emulator, kind: str) -> list[dict[str, Any]]:
    return [
        entry.message
        for entry in emu.transcript
        if entry.direction == "client" and entry.message.get("type") == kind
    ]


def outputs(emu: Emulator) -> dict[str, Any]:
    """Every ``function_call_output`` sent, by call id, its payload decoded; never two."""
    found: dict[str, Any] = {}
    for message in sent(emu, "response.item.create"):
        item = message["item"]
        if item.get("type") == "function_call_output":
            assert item["call_id"] not in found, f"second output for {item['call_id']}"
            found[item["call_id"]] = json.loads(item["output"])
    return found


def server_errors(emu: Emulator) -> list[str]:
    return [
        entry.message["error"]["code"]
        for entry in emu.transcript
        if entry.direction == "server" and entry.message.get("type") == "error"
    ]
