"""The critical path of one tool turn, stage by stage: where the time between the ``toolCall``
bytes and the answer's write goes, for livebridge and for the raw client, side by side.

Each stage is stamped with ``time.perf_counter_ns`` by wrappers this probe installs around the
functions that mark it (the hot path itself carries no stamps): the websocket's
``data_received`` (bytes decrypted and handed to websockets), the frame handed to the client
(``recv`` returned), decoded, the first handler started, the last handler ended, the answer
encoded, written (the write call returned: the bytes are in the kernel).
The table shows each stage's p50 in µs from the bytes' arrival, over many turns of K parallel
calls, rounds of the two clients alternating; the server's own turnaround (``toolCall`` sent
→ answer received) is beside it.

Run with ``python -m benchmarks.critical_path [--turns N] [--calls K ...] [--delay S]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from websockets.asyncio.connection import Connection

from benchmarks import clients
from benchmarks.io_wait import io_sleep
from benchmarks.server import Server, model_name, pin_to_one_core, serve
from livebridge.protocol import websocket
from livebridge.vendors.gemini import connector, wire

STAGES = (
    "frame received",
    "decoded",
    "protocol done",
    "first handler",
    "last handler started",
    "last handler ended",
    "encoded",
    "written",
)
now = time.perf_counter_ns


class Stamps:
    """The stamps of the turn in progress, and every finished turn's."""

    def __init__(self) -> None:
        self.arrived = 0  # the newest data_received
        self.turn: dict[str, int] | None = None
        self.turns: list[dict[str, int]] = []

    def start(self) -> None:
        self.turn = {"bytes read": self.arrived, "frame received": self._received}
        self._received = 0

    def mark(self, stage: str, first: bool = False) -> None:
        if self.turn is not None and not (first and stage in self.turn):
            self.turn[stage] = now()

    def finish(self) -> None:
        if self.turn is not None:
            self.turns.append(self.turn)
            self.turn = None

    _received = 0


STAMPS = Stamps()


def _patch(owner: Any, name: str, make: Callable[[Any], Any]) -> Callable[[], None]:
    original = getattr(owner, name)
    setattr(owner, name, make(original))
    return lambda: setattr(owner, name, original)


@contextmanager
def probes() -> Iterator[None]:
    """Wrap the functions that mark each stage (both clients share the websocket ones)."""
    undo = []

    def data_received(original: Any) -> Any:
        def wrapped(self: Any, data: bytes) -> None:
            STAMPS.arrived = now()
            original(self, data)

        return wrapped

    def recv(original: Any) -> Any:
        async def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
            frame = await original(self, *args, **kwargs)
            STAMPS._received = now()
            return frame

        return wrapped

    def decode(original: Any) -> Any:
        def wrapped(data: Any) -> Any:
            message = original(data)
            if message.tool_call is not None:
                STAMPS.start()
                STAMPS.mark("decoded")
            return message

        return wrapped

    def receive(original: Any) -> Any:
        def wrapped(self: Any, message: Any, at: float) -> Any:
            out = original(self, message, at)
            if message.tool_call is not None:
                STAMPS.mark("protocol done")
            return out

        return wrapped

    def encode_client(original: Any) -> Any:
        def wrapped(item: Any) -> Any:
            frame = original(item)
            STAMPS.mark("encoded")
            return frame

        return wrapped

    def encode(original: Any) -> Any:
        def wrapped(message: Any) -> Any:
            frame = original(message)
            if isinstance(message, dict) and "toolResponse" in message:
                STAMPS.mark("encoded")
            return frame

        return wrapped

    def sent(original: Any) -> Any:
        async def wrapped(*args: Any, **kwargs: Any) -> Any:
            result = await original(*args, **kwargs)
            STAMPS.mark("written")
            STAMPS.finish()
            return result

        return wrapped

    from livebridge.vendors.gemini.protocol import GeminiLiveProtocol

    undo.append(_patch(Connection, "data_received", data_received))
    undo.append(_patch(Connection, "recv", recv))
    undo.append(_patch(wire, "decode_server", decode))
    undo.append(_patch(GeminiLiveProtocol, "receive", receive))
    undo.append(_patch(connector, "encode_client", encode_client))
    undo.append(_patch(wire, "encode", encode))
    undo.append(_patch(connector, "send_and_ping", sent))
    undo.append(_patch(websocket, "send_and_ping", sent))
    undo.append(_patch(Connection, "send", sent))
    try:
        yield
    finally:
        for step in reversed(undo):
            step()


#: What the handlers wait on: ``asyncio.sleep`` (a loop timer) or ``io_wait.io_sleep``.
WAIT: Callable[[float], Awaitable[None]] = asyncio.sleep


async def handler_work(i: int, delay: float) -> dict[str, int]:
    STAMPS.mark("first handler", first=True)
    STAMPS.mark("last handler started")
    if delay:
        await WAIT(delay)
    STAMPS.mark("last handler ended")
    return {"i": i}


async def one_run(server: Server, variant: str, calls: int, turns: int, delay: float) -> None:
    model = model_name("turnaround", calls, turns, variant)
    await clients.CLIENTS[variant](server, model, turns, delay)


def stage_table(
    samples: dict[str, list[dict[str, int]]], served: dict[str, list[float]]
) -> list[str]:
    lines = [
        "| stage (p50, µs after the bytes were read) | " + " | ".join(samples) + " |",
        "|---|" + "---:|" * len(samples),
    ]
    for stage in STAGES:
        cells = []
        for turns in samples.values():
            values = [t[stage] - t["bytes read"] for t in turns if stage in t and t["bytes read"]]
            cells.append(f"{statistics.median(values) / 1000:.0f}" if values else "—")
        lines.append(f"| {stage} | " + " | ".join(cells) + " |")
    cells = [f"{statistics.median(s):.0f}" if s else "—" for s in served.values()]
    lines.append("| server's turnaround above the handler | " + " | ".join(cells) + " |")
    return lines


async def measure(server: Server, calls: int, turns: int, delay: float, rounds: int) -> list[str]:
    variants = ("livebridge", "raw")
    samples: dict[str, list[dict[str, int]]] = {v: [] for v in variants}
    served: dict[str, list[float]] = {v: [] for v in variants}
    with probes():
        clients.work = handler_work
        for _ in range(rounds):
            for variant in variants:
                STAMPS.turns = []
                await one_run(server, variant, calls, turns, delay)
                samples[variant] += STAMPS.turns[2:]  # the first turns warm up
                served[variant] += [
                    (row["seconds"] - delay) * 1e6 for row in server.take_results()[2:]
                ]
    title = f"K = {calls}, handler {delay * 1000:.0f} ms, {rounds} rounds of {turns} turns"
    return [title, "", *stage_table(samples, served)]


async def run(server: Server, calls: Sequence[int], turns: int, delay: float) -> list[str]:
    lines: list[str] = []
    for k in calls:
        lines += await measure(server, k, turns, delay, rounds=4)
        lines.append("")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--calls", type=int, nargs="*", default=[1, 8])
    parser.add_argument("--delay", type=float, default=0.05)
    parser.add_argument("--handler", choices=("timer", "io"), default="timer")
    options = parser.parse_args(argv)
    global WAIT
    WAIT = io_sleep if options.handler == "io" else asyncio.sleep
    with tempfile.TemporaryDirectory() as directory, serve(Path(directory)) as server:
        pin_to_one_core()
        lines = asyncio.run(run(server, options.calls, options.turns, options.delay))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
