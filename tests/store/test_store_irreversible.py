"""An irreversible tool is journaled as a non-idempotent one is, whatever else it says.

A worker that died while running ``send_invoice`` (registered ``idempotent=True``, but
``irreversible=True``) left a ``started`` entry: the next worker's re-issue is answered
``outcome_unknown`` and never runs it again; an ordinary idempotent tool beside it runs again.
"""

from __future__ import annotations

import time
from typing import Any

from livebridge.emulator import Emulator
from livebridge.store import Entry, MemoryStore
from livebridge.store.base import request_digest
from tests.store.test_store_session import Booking, dead_worker, turn, wait_for_lease
from tests.support.gemini_sessions import errors


class Invoicing(Booking):
    """``Booking``'s tools and ``send_invoice``; the rule model calls each for every place a
    turn names."""

    def __init__(self) -> None:
        super().__init__()
        self.invoiced: list[str] = []

        @self.tools.tool(irreversible=True, idempotent=True)
        async def send_invoice(city: str) -> dict[str, Any]:
            """Send the invoice (once sent, it is sent)."""
            self.invoiced.append(city)
            return {"sent": city}


def started(name: str, epoch: int) -> Entry:
    request = request_digest(name, b'{"city":"Paris"}')
    return Entry(f"gone-{name}", name, request, "started", epoch, "dead", time.time())


async def test_an_irreversible_call_a_dead_worker_started_is_not_run_again() -> None:
    app, store = Invoicing(), MemoryStore(lease_ttl=0.5)
    async with Emulator() as emu:
        await turn(emu, app, store, "Weather in Oslo?")
        stored = (await store.load("c")).handle
        assert stored is not None
        await dead_worker(store, started("send_invoice", stored.seq), started("get_weather", 1))
        await wait_for_lease(store)
        settled = await turn(emu, app, store, "Invoice Paris")
        await emu.settled()
        assert errors(emu) == []
    by_name = {s.name: s for s in settled}
    assert by_name["send_invoice"].outcome == "rejected"
    assert by_name["send_invoice"].error is not None
    assert by_name["send_invoice"].error["type"] == "outcome_unknown"
    assert app.invoiced == ["Oslo"]  # Paris: the dead worker may have sent it
    assert by_name["get_weather"].outcome == "ok"  # idempotent and reversible: runs again
    assert app.weather == ["Oslo", "Paris"]
