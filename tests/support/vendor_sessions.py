"""One ``LiveSession`` per vendor against the emulator, for tests that run on both."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any, Literal

import livebridge
from livebridge import LiveSession
from livebridge.emulator import Emulator
from livebridge.protocol.events import SessionEvent, TurnComplete
from tests.support.gemini_sessions import MODEL, TEXT_CONFIG, collect_until

Vendor = Literal["gemini", "openai"]
VENDORS: tuple[Vendor, ...] = ("gemini", "openai")


def open_vendor_session(
    vendor: Vendor, emu: Emulator, tools: livebridge.ToolRegistry, **settings: Any
) -> AbstractAsyncContextManager[LiveSession]:
    """A text session to ``emu`` speaking ``vendor``'s protocol."""
    if vendor == "openai":
        return LiveSession.connect(
            emu.openai_client(),
            model="gpt-realtime",
            tools=tools,
            config={"output_modalities": ["text"]},
            **settings,
        )
    return LiveSession.connect(
        emu.client(), model=MODEL, tools=tools, config=TEXT_CONFIG, **settings
    )


async def settled_turn(session: LiveSession) -> list[SessionEvent]:
    """Every event up to the model's turn ending."""
    return await collect_until(session, lambda e: isinstance(e, TurnComplete))
