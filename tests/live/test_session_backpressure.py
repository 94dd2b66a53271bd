"""App input waits when the server stops reading: the outbox never grows past its bound."""

from __future__ import annotations

import base64
import random
import threading

import anyio
import pytest

import livebridge
from livebridge import SessionOptions
from livebridge.emulator import Conversation, Emulator
from livebridge.emulator.faults import Faults
from livebridge.protocol.outbox import Outbox
from livebridge.protocol.transport import Audio, Text
from tests.support.gemini_sessions import open_session

LIMIT = 64 * 1024


@pytest.mark.serial  # fills the socket's buffers: the fewer other processes, the sooner
async def test_send_text_waits_while_the_server_does_not_read() -> None:
    chunk = base64.b64encode(random.Random(0).randbytes(12_288)).decode()  # 16 KB, no deflate
    accepted = 0
    waited = False
    done = threading.Event()  # the emulator runs its own event loop in another thread

    async def slow_reader(conv: Conversation) -> None:
        await anyio.to_thread.run_sync(done.wait, 60)
        conv.session.abort()  # drop what it never read

    async with Emulator(slow_reader, faults=Faults(read_delay=2.0)) as emu:
        options = SessionOptions(outbox_bytes=LIMIT, shutdown_grace=0.1)
        async with open_session(emu, livebridge.ToolRegistry(), options=options) as session:
            for _ in range(2_000):  # 32 MB if nothing pushed back
                # the push back: one send held for a whole second (the server takes a chunk
                # every 2 s, so a full outbox stays full that long however slow the machine)
                with anyio.move_on_after(1) as held:
                    await session.send_text(chunk)
                if held.cancelled_caught:
                    waited = True
                    break
                accepted += 1
            done.set()
            assert waited
            outbox = session._protocol.outbox
            assert outbox.full
            assert outbox._queued <= LIMIT + len(chunk)
    # the socket's buffers take some megabytes, the server reads 8 KB/s: the rest waited
    assert accepted * len(chunk) < 16 * 1024 * 1024


def test_outbox_counts_bytes_and_reports_full() -> None:
    outbox = Outbox(limit_bytes=10)
    outbox.push(Text("12345"))
    assert not outbox.full
    outbox.push(Audio(b"\x00" * 6))
    assert outbox.full
    assert outbox.take(blocking=False) == Text("12345")
    assert not outbox.full
    assert outbox.take(blocking=False) == Audio(b"\x00" * 6)
    assert not outbox
