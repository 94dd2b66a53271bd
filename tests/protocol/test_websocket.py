"""``send_and_ping`` over a real local websocket: a message and the ping that proves it was read
leave in one write, and the pong comes back only after the server has read the message."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve

from livebridge.errors import TransportClosed
from livebridge.protocol.websocket import send_and_ping


def frames(data: bytes) -> list[tuple[int, bytes]]:
    """The client (masked) websocket frames in ``data``: (opcode, payload unmasked)."""
    found = []
    at = 0
    while at < len(data):
        opcode, length = data[at] & 0x0F, data[at + 1] & 0x7F
        at += 2
        if length == 126:
            length, at = int.from_bytes(data[at : at + 2], "big"), at + 2
        elif length == 127:
            length, at = int.from_bytes(data[at : at + 8], "big"), at + 8
        mask, at = data[at : at + 4], at + 4
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(data[at : at + length]))
        found.append((opcode, payload))
        at += length
    assert at == len(data)
    return found


async def test_a_message_and_its_ping_leave_in_one_write() -> None:
    received: list[str | bytes] = []

    async def echo_count(ws: ServerConnection) -> None:
        async for message in ws:
            received.append(message)

    async with (
        serve(echo_count, "127.0.0.1", 0) as server,
        connect(f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}") as ws,
    ):
        writes: list[bytes] = []
        transport: Any = ws.transport
        write = transport.write

        def record(data: Any) -> None:
            writes.append(bytes(data))
            write(data)

        transport.write = record
        pong = await send_and_ping(ws, [b'{"toolResponse": {}}', b'{"second": 1}'])
        await asyncio.wait_for(pong, 10)
        transport.write = write
        # The server answers the ping only after reading what came before it.
        assert received == ['{"toolResponse": {}}', '{"second": 1}']
    # One write: two text frames, then the ping.
    assert [[opcode for opcode, _ in frames(data)] for data in writes] == [[0x1, 0x1, 0x9]]


@pytest.mark.parametrize("compression", [None, "deflate"])
async def test_messages_of_every_header_length_arrive_whole_before_the_pong(
    compression: str | None,
) -> None:
    """7-bit, 16-bit and 64-bit lengths, framed and masked by hand; with permessage-deflate
    negotiated, websockets frames (and compresses) them itself."""
    received: list[str | bytes] = []

    async def keep(ws: ServerConnection) -> None:
        async for message in ws:
            received.append(message)

    messages = [
        b'"' + bytes([0x61 + i % 26]) * size + b'"' for i, size in enumerate((3, 300, 70_000))
    ]
    async with (
        serve(keep, "127.0.0.1", 0, compression=compression, max_size=None) as server,
        connect(
            f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}", compression=compression
        ) as ws,
    ):
        for _ in range(2):  # the second with masks of their own
            pong = await send_and_ping(ws, messages)
            await asyncio.wait_for(pong, 10)
        assert received == [m.decode() for m in messages] * 2


async def test_a_closed_connection_raises_transport_closed() -> None:
    async def close_at_once(ws: ServerConnection) -> None:
        await ws.close(1011, "gone")

    async with (
        serve(close_at_once, "127.0.0.1", 0) as server,
        connect(f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}") as ws,
    ):
        await ws.wait_closed()
        with pytest.raises(TransportClosed) as caught:
            await send_and_ping(ws, [b"{}"])
    assert caught.value.code == 1011
