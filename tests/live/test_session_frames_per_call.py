"""How many Python frames the session shell, the protocol base and the Gemini vendor cost per
tool call and per server message: a count no timing noise moves.

A Python-level call is several hundred machine instructions before it does anything, so a
turn's events are queued a run at a time (``EventBuffer.put_all``) and read through one
generator (``EventBuffer.stream``), a message with no outputs costs the shell no ``_apply``,
an unobserved protocol makes no tuple of a message's kinds, and a look for fates that finds
none waiting costs no call into the reporter. These tests count the frames entered
(``sys.setprofile``) in those packages over the in-memory loop of ``benchmarks.memory_loop``,
with the handle updates a real turn carries (benchmarks/PROFILE.md, the session path).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import FrameType
from typing import Any

import livebridge
from benchmarks import memory_loop
from livebridge.protocol.transport import Transport
from livebridge.vendors.gemini import wire

TURNS = 40
_ROOT = os.path.dirname(livebridge.__file__)
_PARTS = (("live",), ("protocol",), ("vendors", "gemini"))
_SCOPE = tuple(os.path.join(_ROOT, *part) + os.sep for part in _PARTS)


def handle_update(n: int) -> bytes:
    return wire.encode({"sessionResumptionUpdate": {"newHandle": f"h{n}", "resumable": True}})


class HandledTransport(memory_loop.MemoryTransport):
    """The memory loop's turns, each followed by a handle update (as the service sends)."""

    def __init__(self, turns: int) -> None:
        super().__init__(turns)
        self._updates = 0

    async def recv(self) -> wire.ServerMessage:
        if self._next % 2 == 0 and self._next and self._updates < self._next // 2:
            self._updates += 1
            return wire.decode_server(handle_update(self._updates))
        return await super().recv()


class HandledConnector(memory_loop.MemoryConnector):
    @asynccontextmanager
    async def open(self, handle: str | None) -> AsyncIterator[Transport]:
        yield HandledTransport(self.turns)


class Frames:
    """Python frames entered in the session path's packages, by function name."""

    def __init__(self) -> None:
        self.names: Counter[str] = Counter()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(_SCOPE):
            self.names[frame.f_code.co_name] += 1


async def run_turns(turns: int) -> None:
    await memory_loop.livebridge_loop(turns, HandledConnector(turns))


async def frames_per_turn() -> Counter[str]:
    await run_turns(3)  # warm: imports, the first session
    frames = Frames()
    sys.setprofile(frames)
    try:
        await run_turns(TURNS)
    finally:
        sys.setprofile(None)
    return frames.names


def test_a_tool_call_costs_the_session_path_fourteen_python_frames_at_most() -> None:
    names = asyncio.run(frames_per_turn())
    per_call = sum(names.values()) / (TURNS * memory_loop.CALLS)
    assert per_call <= 14.0, names.most_common(20)  # 18.0 before; 13.2 measured
    assert names["put"] == 0  # a turn's events are queued a run at a time


def test_a_message_without_outputs_costs_no_apply_and_no_tuple_of_kinds() -> None:
    names = asyncio.run(frames_per_turn())
    # Per turn: the toolCall, the answers sent and turnComplete; the handle update has none.
    assert names["_apply"] <= 3 * TURNS + 2, names["_apply"]
    assert names["server_kinds"] == 0  # nobody counts messages: no kinds made
    assert names["fates"] <= TURNS + 2  # the reporter: only when fates wait (the answered ones)
