"""Two workers racing for one conversation while Redis is paused, killed and restarted.

Run with ``python -m benchmarks.bench_store_pause`` (``--seconds N``, default 600; ``--quick``
for a smoke run); it starts its own redis-server. Each worker loops: take the conversation
(``StoreConnector.run``: the real lease, heartbeat and journal), ask a random handful of the
same requests (as a model re-issuing them after a takeover) through a real ``Dispatcher``,
leave. Meanwhile Redis is frozen (SIGSTOP) for up to 2.5 leases, or killed and started
again empty. Reported: handler runs, double executions (a request run twice while Redis kept
its data: must be 0), fates per admitted call, and the process's RSS over the run.
``tests/store/test_store_faults.py`` runs the same world for a few fixed seeds.
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import anyio

from livebridge import Call, ToolRegistry
from livebridge.calls.dispatch import Dispatcher
from livebridge.errors import StoreError
from livebridge.store import RedisStore
from livebridge.store.connector import StoreConnector

LEASE_TTL = 0.6


class _NoInner:
    """The journal path needs no Live connection: the connector is never opened here."""

    def protocol(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def open(self, handle: str | None) -> Any:
        raise NotImplementedError


@dataclass
class World:
    """What every worker shares: the requests, what ran, each call's fate."""

    redis: Any  # tests.support.redis_server.RedisServer
    rng: random.Random
    requests: int = 40
    calls: int = 0  # calls asked so far (their ids are unique)
    era: int = 0  # Redis restarts so far (each forgets the journal: no persistence)
    runs: Counter[tuple[int, int]] = field(default_factory=Counter)  # (request, era) → runs
    fates: dict[str, str] = field(default_factory=dict)
    twice: list[str] = field(default_factory=list)  # a call given a second fate
    faults: Counter[str] = field(default_factory=Counter)

    def fate(self, call_id: str, kind: str) -> None:
        if call_id in self.fates:
            self.twice.append(call_id)
        self.fates[call_id] = kind

    @property
    def doubles(self) -> list[tuple[int, int]]:
        return [key for key, n in self.runs.items() if n > 1]


def _tools(world: World, asked_in: list[int]) -> ToolRegistry:
    """``book``, counting its runs by the era its call was asked in (its ``started`` entry
    went to that Redis, even if the handler starts just after a restart)."""
    tools = ToolRegistry()

    @tools.tool(timeout=30.0)
    async def book(n: int) -> int:
        """Not idempotent: journaled started before it runs."""
        world.runs[n, asked_in[0]] += 1
        await anyio.sleep(world.rng.random() * 0.02)  # a window for a pause to land in
        return n

    return tools


async def worker(world: World, name: str, stop: anyio.Event) -> None:
    """Sessions of one conversation, one after another, until ``stop``."""
    asked_in = [0]
    tools = _tools(world, asked_in)
    store = RedisStore(world.redis.url, lease_ttl=LEASE_TTL, handle_ttl=60.0, timeout=0.2)
    session = 0
    try:
        while not stop.is_set():
            session += 1
            connector = StoreConnector(_NoInner(), store, "c", owner=f"{name}-{session}")
            in_flight: list[str] = []
            try:
                async with anyio.create_task_group() as tg:
                    await tg.start(connector.run)
                    dispatcher = Dispatcher(tools, journal=connector.journal)
                    asked = world.rng.sample(range(world.requests), world.rng.randint(1, 4))
                    for n in asked:
                        await anyio.sleep(world.rng.random() * LEASE_TTL / 2)  # the model thinks
                        world.calls += 1
                        call = Call(f"{name}-{world.calls}-{n}", "book", {"n": n})
                        asked_in[0] = world.era
                        in_flight.append(call.id)
                        (outcome,) = await dispatcher.run([call])
                        in_flight.remove(call.id)
                        world.fate(call.id, outcome.kind)
                    tg.cancel_scope.cancel()
            except* StoreError:  # busy, lost, unavailable: the session ended
                pass
            finally:
                for call_id in in_flight:  # the session ended under it
                    world.fate(call_id, "orphaned")
            await anyio.sleep(world.rng.random() * 0.05)
    finally:
        await store.aclose()


async def faults(world: World, stop: anyio.Event) -> None:
    """Freeze Redis longer or shorter than the lease, or kill and restart it."""
    server = world.redis
    while not stop.is_set():
        await anyio.sleep(world.rng.uniform(0.1, 0.6))
        roll = world.rng.random()
        if roll < 0.7 and server.process is not None:
            world.faults["pause"] += 1
            server.process.send_signal(signal.SIGSTOP)
            try:
                await anyio.sleep(world.rng.uniform(0.1, 2.5) * LEASE_TTL)
            finally:
                server.process.send_signal(signal.SIGCONT)
        elif roll < 0.85:
            world.faults["restart"] += 1
            server.stop()
            world.era += 1
            await anyio.to_thread.run_sync(server.start)


async def race(world: World, seconds: float) -> None:
    """Two workers and the faults, for ``seconds``."""
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker, world, "a", stop)
        tg.start_soon(worker, world, "b", stop)
        tg.start_soon(faults, world, stop)
        await anyio.sleep(seconds)
        stop.set()


def _rss_mib() -> float:
    with open("/proc/self/statm") as file:
        pages = int(file.read().split()[1])
    return pages * 4096 / 2**20


async def soak(seconds: float, seed: int) -> list[str]:
    from tests.support.redis_server import RedisServer

    server = RedisServer()
    try:
        world = World(server, random.Random(seed))
        rss: list[float] = [_rss_mib()]
        started = time.monotonic()
        step = max(seconds / 10, 1.0)
        while time.monotonic() - started < seconds:
            await race(world, min(step, seconds - (time.monotonic() - started)))
            rss.append(_rss_mib())
    finally:
        server.close()
    kinds = Counter(world.fates.values())
    return [
        f"seconds {seconds:g}, seed {seed}, lease {LEASE_TTL} s, faults {dict(world.faults)}",
        f"handler runs {sum(world.runs.values())}, double executions {len(world.doubles)},"
        f" calls with two fates {len(world.twice)}",
        f"fates {dict(sorted(kinds.items()))}",
        "RSS MiB over the run: " + " ".join(f"{x:.1f}" for x in rss),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_store_pause")
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    args = parser.parse_args(argv)
    lines = anyio.run(soak, 10.0 if args.quick else args.seconds, args.seed)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
