"""Shared pieces for LiveSession tests: a registry, event collection, transcript queries."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

import anyio
from google.genai import types

from livebridge import LiveSession, ToolRegistry
from livebridge.emulator import Emulator
from livebridge.protocol.events import SessionEvent
from tests.support.timing import seconds

MODEL = "gemini-live-2.5-flash-preview"
TEXT_CONFIG = types.LiveConnectConfig(response_modalities=[types.Modality.TEXT])

E = TypeVar("E")


async def collect_until(
    session: LiveSession,
    done: Callable[[SessionEvent], bool],
    timeout: float = seconds(30),  # noqa: ASYNC109 (a bound for a test, not a synchronisation)
) -> list[SessionEvent]:
    """Every event up to and including the first for which ``done`` is true."""
    seen: list[SessionEvent] = []
    with anyio.fail_after(timeout):
        async for event in session.events():
            seen.append(event)
            if done(event):
                return seen
    raise AssertionError(f"the session ended before the expected event; saw {seen!r}")


def open_session(
    emu: Emulator, tools: ToolRegistry, **settings: Any
) -> AbstractAsyncContextManager[LiveSession]:
    """``LiveSession.connect`` to ``emu`` in TEXT modality; ``settings`` go to ``connect``."""
    return LiveSession.connect(
        emu.client(), model=MODEL, tools=tools, config=TEXT_CONFIG, **settings
    )


def of_type(events: list[SessionEvent], kind: type[E]) -> list[E]:
    return [e for e in events if isinstance(e, kind)]


def client_messages(emu: Emulator, field: str) -> list[dict[str, Any]]:
    """Every client message carrying top-level ``field`` (camelCase), in order."""
    return [
        entry.message[field]
        for entry in emu.transcript
        if entry.direction == "client" and field in entry.message
    ]


def errors(emu: Emulator) -> list[str]:
    """The emulator's contract violations of severity error, as readable lines."""
    return [f"{v.kind}: {v.message}" for v in emu.violations if v.severity == "error"]
