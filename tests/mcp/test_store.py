"""An MCP tool's calls go through the conversation store's journal like any tool's: a call a
dead worker started is not sent to the server again."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

import livebridge
from livebridge import LiveSession
from livebridge.emulator import Emulator
from livebridge.protocol.events import ToolCallSettled, TurnComplete
from livebridge.store import MemoryStore
from livebridge.store.base import request_digest
from tests.mcp.test_stdio import server
from tests.store.test_store_session import dead_worker, entry, wait_for_lease
from tests.support.gemini_sessions import MODEL, TEXT_CONFIG, collect_until, errors, of_type


async def turn(
    emu: Emulator, tools: livebridge.ToolRegistry, store: MemoryStore, text: str
) -> list[ToolCallSettled]:
    async with LiveSession.connect(
        emu.client(), model=MODEL, tools=tools, config=TEXT_CONFIG, store=store, conversation="c"
    ) as session:
        await session.send_text(text)
        events = await collect_until(session, lambda e: isinstance(e, TurnComplete))
    return of_type(events, ToolCallSettled)


@pytest.mark.parametrize("idempotent", [False, True])
async def test_a_call_a_dead_worker_started_is_not_sent_again_unless_idempotent(
    tmp_path: Path, idempotent: bool
) -> None:
    marks = tmp_path / "marks"
    tools = livebridge.ToolRegistry()
    tools.add_mcp(server(marks), include=["lookup"], idempotent=idempotent)
    store = MemoryStore(lease_ttl=0.5)
    async with Emulator() as emu:
        (oslo,) = await turn(emu, tools, store, "Weather in Oslo?")
        stored = (await store.load("c")).handle
        assert stored is not None
        # The request as the dispatcher digests an MCP tool's arguments: one ``arguments`` field.
        request = request_digest("lookup", b'{"arguments":{"city":"Paris"}}')
        started = msgspec.structs.replace(entry("lookup", stored.seq), request=request)
        await dead_worker(store, started)
        await wait_for_lease(store)
        (paris,) = await turn(emu, tools, store, "Weather in Paris?")
        await emu.settled()
        assert errors(emu) == []
    assert oslo.outcome == "ok"
    if idempotent:
        assert paris.outcome == "ok"  # it runs again
    else:
        assert paris.outcome == "rejected"
        assert paris.error is not None and paris.error["type"] == "outcome_unknown"
