"""The tool path without sockets: livebridge's own CPU per call next to a bare loop's.

A ``LiveSession`` runs over an in-memory transport that hands it encoded server frames (a
``toolCall`` of 8 calls, then ``turnComplete`` once every answer arrived) and encodes what it
sends, so the codec is measured but TLS, websocket framing and the kernel are not: what is left
is what livebridge adds (reader, protocol, ledger, dispatcher, writer, events). The ``bare``
loop decodes the same frames, gathers the same handlers and encodes one answer: the floor of
that work. Both run in this process; rounds alternate and the best of each is reported.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from livebridge import ToolRegistry
from livebridge.live.session import LiveSession
from livebridge.protocol.actions import ProtocolOptions
from livebridge.protocol.events import TurnComplete
from livebridge.protocol.transport import ClientItem, Transport
from livebridge.vendors.gemini import wire
from livebridge.vendors.gemini.client_frames import encode_client
from livebridge.vendors.gemini.protocol import GeminiLiveProtocol

CALLS = 8
SETUP = b'{"setupComplete":{}}'
DONE = b'{"serverContent":{"turnComplete":true}}'


def tool_call(turn: int) -> bytes:
    calls = [{"id": f"{turn}-{i}", "name": "work", "args": {"i": i}} for i in range(CALLS)]
    return wire.encode({"toolCall": {"functionCalls": calls}})


class MemoryTransport:
    """Serves ``turns`` turns: each ``toolCall``, then ``turnComplete`` once it was answered."""

    session_id: str | None = None

    def __init__(self, turns: int) -> None:
        self._frames = [frame for turn in range(turns) for frame in (tool_call(turn), DONE)]
        self._next = 0
        self._answered = asyncio.Event()
        self._answered.set()

    async def recv(self) -> wire.ServerMessage:
        if self._next % 2 == 0:  # a toolCall goes out once the last one was answered
            await self._answered.wait()
            self._answered.clear()
        if self._next >= len(self._frames):
            await asyncio.Event().wait()  # the app leaves after the last turn
        frame = self._frames[self._next]
        self._next += 1
        return wire.decode_server(frame)

    async def send(self, item: ClientItem) -> None:
        encode_client(item)
        self._answered.set()

    async def close(self) -> None:
        return None


class MemoryConnector:
    def __init__(self, turns: int) -> None:
        self.turns = turns

    def protocol(
        self, tools: ToolRegistry, options: ProtocolOptions, *, observed: bool
    ) -> GeminiLiveProtocol:
        return GeminiLiveProtocol(tools, options, observed=observed)

    @asynccontextmanager
    async def open(self, handle: str | None) -> AsyncIterator[Transport]:
        yield MemoryTransport(self.turns)


async def livebridge_loop(turns: int, connector: MemoryConnector | None = None) -> None:
    """``turns`` turns of a ``LiveSession`` over ``connector`` (the memory loop's own by
    default)."""
    tools = ToolRegistry()

    @tools.tool(name="work")
    async def handler(i: int) -> dict[str, int]:
        """Benchmark work."""
        return {"i": i}

    connector = connector or MemoryConnector(turns)
    async with LiveSession.connect(tools=tools, connector=connector) as session:
        done = 0
        async for event in session.events():
            if isinstance(event, TurnComplete):
                done += 1
                if done == turns:
                    return


async def work(i: int) -> dict[str, int]:
    return {"i": i}


async def bare_loop(turns: int) -> None:
    for turn in range(turns):
        message = wire.decode_server(tool_call(turn))
        assert message.tool_call is not None
        calls = message.tool_call.function_calls
        results = await asyncio.gather(*(work(int(c.args["i"])) for c in calls))
        responses: list[dict[str, Any]] = [
            {"id": c.id, "name": c.name, "response": {"output": r}}
            for c, r in zip(calls, results, strict=True)
        ]
        wire.encode({"toolResponse": {"functionResponses": responses}})
        wire.decode_server(DONE)


LOOPS = {"livebridge": livebridge_loop, "bare": bare_loop}


async def measure(turns: int, rounds: int) -> dict[str, float]:
    """Best CPU µs per call of each loop over ``rounds`` alternating rounds."""
    best = {name: float("inf") for name in LOOPS}
    for _ in range(rounds):
        for name, loop in LOOPS.items():
            cpu = time.process_time()
            await loop(turns)
            best[name] = min(best[name], (time.process_time() - cpu) / (turns * CALLS) * 1e6)
    return best
