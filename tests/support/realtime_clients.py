"""Driving the emulator's OpenAI Realtime side with the official ``openai`` SDK."""

from __future__ import annotations

import json
from typing import Any

from openai.resources.realtime.realtime import AsyncRealtimeConnection
from openai.types.realtime import (
    RealtimeConversationItemFunctionCall,
    RealtimeServerEvent,
    ResponseDoneEvent,
    ResponseOutputItemDoneEvent,
    SessionUpdatedEvent,
)

from livebridge.emulator import Emulator, Violation

MODEL = "gpt-realtime"
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
THREE_CITIES = "Weather in Oslo, Lisbon and Paris?"


def session_config(**extra: Any) -> dict[str, Any]:
    """A GA session declaring ``get_weather(city)``, answering in text unless told."""
    return {"type": "realtime", "output_modalities": ["text"], "tools": [WEATHER_TOOL], **extra}


async def next_event(conn: AsyncRealtimeConnection) -> RealtimeServerEvent:
    return await conn.recv()


async def until(conn: AsyncRealtimeConnection, kind: str) -> RealtimeServerEvent:
    """Skip events until one of type ``kind`` arrives."""
    while True:
        event = await conn.recv()
        if event.type == kind:
            return event


async def configure(conn: AsyncRealtimeConnection, **extra: Any) -> SessionUpdatedEvent:
    """``session.created``, then ``session.update`` with ``session_config(**extra)``."""
    assert (await conn.recv()).type == "session.created"
    await conn.session.update(session=session_config(**extra))  # type: ignore[arg-type]
    updated = await until(conn, "session.updated")
    assert isinstance(updated, SessionUpdatedEvent)
    return updated


async def ask(conn: AsyncRealtimeConnection, text: str) -> None:
    """A user text message, then ``response.create``."""
    await conn.conversation.item.create(
        item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    )
    await conn.response.create()


async def response(conn: AsyncRealtimeConnection) -> list[RealtimeServerEvent]:
    """Every event up to and including the next ``response.done``."""
    events = []
    while True:
        event = await conn.recv()
        events.append(event)
        if event.type == "response.done":
            return events


def done(events: list[RealtimeServerEvent]) -> ResponseDoneEvent:
    last = events[-1]
    assert isinstance(last, ResponseDoneEvent)
    return last


def calls(events: list[RealtimeServerEvent]) -> list[RealtimeConversationItemFunctionCall]:
    """The function calls completed in ``events`` (``response.output_item.done``)."""
    return [
        event.item
        for event in events
        if isinstance(event, ResponseOutputItemDoneEvent)
        and isinstance(event.item, RealtimeConversationItemFunctionCall)
    ]


async def answer(
    conn: AsyncRealtimeConnection, call: RealtimeConversationItemFunctionCall, sky: str = "sunny"
) -> None:
    """One ``function_call_output`` for ``call``."""
    city = json.loads(call.arguments)["city"]
    output = json.dumps({"output": {"city": city, "sky": sky}})
    assert call.call_id is not None
    await conn.conversation.item.create(
        item={"type": "function_call_output", "call_id": call.call_id, "output": output}
    )


def kinds(emu: Emulator) -> list[tuple[str, str]]:
    """(kind, severity) of every violation, once every closed connection is judged."""
    return [(v.kind, v.severity) for v in emu.violations]


def of_kind(emu: Emulator, kind: str) -> list[Violation]:
    return [v for v in emu.violations if v.kind == kind]
