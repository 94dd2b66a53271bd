"""An emulator that serves for long keeps a bounded report, and a connection that never
finishes its handshake is closed after ``OPEN_TIMEOUT``."""

from __future__ import annotations

import socket

import anyio
import pytest

from livebridge import ToolRegistry
from livebridge.emulator import Emulator, Faults, Retention, ServiceOptions
from livebridge.emulator import server as emulator_server
from livebridge.emulator.shared import Shared
from livebridge.live.events import TurnComplete
from tests.session_helpers import collect_until, open_session

TURNS = 60


async def test_the_transcript_connections_and_handles_stay_within_their_bounds() -> None:
    retention = Retention(transcript=40, violations=10, connections=2, handles=3)
    async with Emulator(retention=retention) as emu:
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
