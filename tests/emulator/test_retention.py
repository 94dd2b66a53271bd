"""An emulator that serves for long keeps a bounded report (in bytes too), a finished
connection lets go of its socket, and a connection that never finishes its handshake is closed
after ``OPEN_TIMEOUT``."""

from __future__ import annotations

import gc
import socket
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import pytest
from google import genai

from livebridge import LiveSession, ToolRegistry
from livebridge.emulator import Emulator, Faults, Retention, RuleModel, ServiceOptions
from livebridge.emulator import server as emulator_server
from livebridge.emulator.contract import Violation
from livebridge.emulator.history import ENTRY_OVERHEAD, Ledger, footprint
from livebridge.emulator.shared import Shared
from livebridge.errors import UsageError
from livebridge.protocol.events import TurnComplete
from tests.support.gemini_sessions import MODEL, TEXT_CONFIG, collect_until, open_session

TURNS = 60
IMMEDIATE = RuleModel(first_output=0)  # what is kept is measured here, not how soon it answers
WEATHER = ToolRegistry()


@WEATHER.tool
async def get_weather(city: str) -> dict[str, str]:
    """Weather for a city."""
    return {"city": city, "sky": "sunny"}


async def converse(emu: Emulator, client: genai.Client, sessions: int, turns: int) -> None:
    """``sessions`` sessions at once, each ``turns`` turns with two tool calls a turn (one
    ``client`` for all: each ``genai.Client`` keeps some memory of its own for a while)."""

    async def one(n: int) -> None:
        connect = LiveSession.connect(client, model=MODEL, tools=WEATHER, config=TEXT_CONFIG)
        async with connect as session:
            for turn in range(turns):
                await session.send_text(f"Weather in Paris and Rome? ({n}.{turn})")
                await collect_until(session, lambda e: isinstance(e, TurnComplete))

    async with anyio.create_task_group() as group:
        for n in range(sessions):
            group.start_soon(one, n)
    await emu.settled()


@contextmanager
def traced() -> Iterator[list[int]]:
    """The bytes the process gained inside the block (after a collection), in ``grown[0]``."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    grown = [0]
    try:
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        yield grown
        gc.collect()
        grown[0] = tracemalloc.get_traced_memory()[0] - before
    finally:
        if started:
            tracemalloc.stop()


@pytest.mark.slow
async def test_the_transcript_connections_and_handles_stay_within_their_bounds() -> None:
    retention = Retention(transcript=40, violations=10, connections=2, handles=3)
    async with Emulator(IMMEDIATE, retention=retention) as emu:
        for _ in range(4):
            async with open_session(emu, ToolRegistry()) as session:
                for turn in range(TURNS // 4):
                    await session.send_text(f"turn {turn}")
                    await collect_until(session, lambda e: isinstance(e, TurnComplete))
        assert len(emu.transcript) <= 40 + 40 // 4
        assert emu.transcript_dropped + len(emu.transcript) > 4 * TURNS  # every turn was seen
        assert len(emu.connections) <= 2 and emu.connections_served == 4


def test_the_newest_handles_are_kept() -> None:
    shared = Shared(Faults(), ServiceOptions(), lambda: None, retention=Retention(handles=3))
    for n in range(10):
        shared.keep_handle(f"h{n}", {})
    assert list(shared.handles) == ["h7", "h8", "h9"]


def closed_by_server(connection: socket.socket) -> bool:
    """Blocks until the server closes ``connection`` (True), or 5 s pass (False)."""
    connection.settimeout(5)
    try:
        return connection.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


async def test_a_connection_that_never_starts_tls_is_closed_after_the_open_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Half-open connections were held for websockets' 10 s default, each with its buffers."""
    monkeypatch.setattr(emulator_server, "OPEN_TIMEOUT", 0.5)
    async with Emulator() as emu:
        port = emu.port
        connections = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(50)]
        try:
            closed = await anyio.to_thread.run_sync(
                lambda: all(closed_by_server(c) for c in connections)
            )
        finally:
            for connection in connections:
                connection.close()
        assert closed


async def test_a_finished_connection_keeps_no_socket() -> None:
    """Each finished connection held its websocket, and with it asyncio's 256 KiB TLS buffer
    and the deflate compressors: 69 MB per 1,000 turns under ``livebridge emulator``."""
    async with Emulator() as emu:  # keeps every connection, as a test's emulator does
        client = emu.client()
        await converse(emu, client, 2, 1)
        with traced() as grown:
            await converse(emu, client, 20, 1)
        assert len(emu.connections) == 22
    assert grown[0] / 20 < 100_000, f"{grown[0] / 20:,.0f} bytes kept per connection"


BUDGET = 256 << 10


async def test_what_an_emulator_keeps_stays_within_its_byte_budget() -> None:
    async with Emulator(IMMEDIATE, retention=Retention(max_bytes=BUDGET)) as emu:
        client = emu.client()
        await converse(emu, client, 10, 3)  # past the budget already
        with traced() as grown:
            for _ in range(4):
                await converse(emu, client, 10, 3)
        kept = emu.kept_bytes
        assert kept is not None and kept <= BUDGET
        assert emu.transcript_dropped > 0
        assert emu.connections_served == 50
        assert 0 < len(emu.connections) < 50  # the newest, whole
        # of the last wave of ten (which of them ended last is the scheduler's)
        assert all(int(c.id[1:]) > 40 for c in emu.connections), [c.id for c in emu.connections]
        assert emu.violations == [] and emu.violation_counts == {}
    # ~50 KB per session when everything is kept: 40 sessions would hold 2 MB
    assert grown[0] < BUDGET + (512 << 10), f"{grown[0]:,} bytes kept after 40 sessions"


def test_the_ledger_lets_the_oldest_detail_go_first_and_violations_last() -> None:
    ledger = Ledger(4_000)

    def charge(item: str, size: int, *, summary: bool = False) -> list[str]:
        return ledger.charge(item, size - ENTRY_OVERHEAD, summary=summary)

    assert charge("violation 1", 1_000, summary=True) == []
    assert [charge(f"entry {n}", 1_000) for n in (1, 2, 3)] == [[], [], []]
    assert charge("entry 4", 1_000) == ["entry 1", "entry 2"]  # down to 3/4 of the budget
    assert charge("entry 5", 2_500) == ["entry 3", "entry 4", "entry 5"]
    assert charge("violation 2", 3_500, summary=True) == ["violation 1", "violation 2"]
    assert ledger.kept == 0 and len(ledger) == 0


def test_a_footprint_counts_what_an_item_holds_once() -> None:
    text = "x" * 10_000
    assert footprint({"a": text, "b": text}) < footprint({"a": text, "b": "y" * 10_000})
    assert footprint({"a": text}, exclude=[text]) < 1_000


def test_a_violation_dropped_for_the_budget_is_still_counted() -> None:
    shared = Shared(Faults(), ServiceOptions(), lambda: None, retention=Retention(max_bytes=4_000))
    for n in range(100):
        shared.report(Violation("unknown_id", "an answer for no call " * 5, None, f"s{n}"))
    assert len(shared.violations) < 100
    assert shared.tally == {("error", "unknown_id"): 100}
    assert shared.kept_bytes is not None and shared.kept_bytes <= 4_000


def test_a_byte_budget_below_one_is_refused() -> None:
    with pytest.raises(UsageError, match="max_bytes must be at least 1"):
        Retention(max_bytes=0)
