"""A PostgreSQL primary with a synchronous standby; two workers race for one conversation
while the primary is killed and the standby promoted mid-conversation, at a random moment of
each seed. The workers' DSN names both hosts (``target_session_attrs=read-write``).

Invariants: no request runs twice (the promoted standby has every lease epoch and ``started``
entry a worker was told were stored), every admitted call has exactly one fate, and calls run
again once the standby is promoted."""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from livebridge import Call, ToolRegistry
from livebridge.calls.dispatch import Dispatcher
from livebridge.errors import StoreError
from livebridge.store import PostgresStore
from livebridge.store.connector import StoreConnector
from tests.support.postgres_server import PostgresServer
from tests.support.timing import seconds

LEASE_TTL = 0.6


class _NoInner:
    """The journal path needs no Live connection: the connector is never opened here."""

    def protocol(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def open(self, handle: str | None) -> Any:
        raise NotImplementedError


@dataclass
class Pair:
    primary: PostgresServer
    standby: PostgresServer

    @property
    def dsn(self) -> str:
        hosts = f"127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}"
        return f"postgresql://postgres@{hosts}/postgres?target_session_attrs=read-write"


@pytest.fixture
def pair() -> Iterator[Pair]:
    primary = PostgresServer(settings={"synchronous_standby_names": "*"})
    standby: PostgresServer | None = None
    try:
        standby = primary.standby()
        deadline = time.monotonic() + 60
        while primary.sql("SELECT sync_state FROM pg_stat_replication") != [("sync",)]:
            assert time.monotonic() < deadline, "the standby never became synchronous"
            time.sleep(0.02)  # it streams asynchronously until it caught up
        yield Pair(primary, standby)
    finally:
        primary.close()
        if standby is not None:
            standby.close()


@dataclass
class World:
    rng: random.Random
    requests: int = 40
    calls: int = 0
    promoted: bool = False
    runs: Counter[int] = field(default_factory=Counter)  # request → handler runs
    runs_after: int = 0  # handler runs once the standby was promoted
    fates: dict[str, str] = field(default_factory=dict)
    twice: list[str] = field(default_factory=list)

    def fate(self, call_id: str, kind: str) -> None:
        if call_id in self.fates:
            self.twice.append(call_id)
        self.fates[call_id] = kind


async def worker(world: World, dsn: str, name: str, stop: anyio.Event) -> None:
    """Sessions of one conversation, one after another, until ``stop``."""
    tools = ToolRegistry()

    @tools.tool(timeout=30.0)
    async def book(n: int) -> int:
        """Not idempotent: journaled started before it runs."""
        world.runs[n] += 1
        world.runs_after += world.promoted
        await anyio.sleep(world.rng.random() * 0.02)  # a window for the failover to land in
        return n

    store = PostgresStore(dsn, lease_ttl=LEASE_TTL, handle_ttl=60.0, timeout=0.5)
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
                    for n in world.rng.sample(range(world.requests), world.rng.randint(1, 4)):
                        await anyio.sleep(world.rng.random() * LEASE_TTL / 2)  # the model thinks
                        world.calls += 1
                        call = Call(f"{name}-{world.calls}-{n}", "book", {"n": n})
                        in_flight.append(call.id)
                        (outcome,) = await dispatcher.run([call])
                        in_flight.remove(call.id)
                        world.fate(call.id, outcome.kind)
                    tg.cancel_scope.cancel()
            except* StoreError:  # busy, lost, unavailable: the session ended
                pass
            finally:
                for call_id in in_flight:
                    world.fate(call_id, "orphaned")
            await anyio.sleep(world.rng.random() * 0.05)
    finally:
        await store.aclose()


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_a_standby_promoted_mid_conversation_runs_nothing_twice(
    pair: Pair, seed: int
) -> None:
    world = World(random.Random(seed))
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker, world, pair.dsn, "a", stop)
        tg.start_soon(worker, world, pair.dsn, "b", stop)
        with anyio.fail_after(seconds(60)):  # a loaded machine may take a while to start
            while not world.runs:  # noqa: ASYNC110 (the workers' progress)
                await anyio.sleep(0.02)
        await anyio.sleep(world.rng.uniform(0.0, 1.5))  # then a random moment of the talk
        before = sum(world.runs.values())
        pair.primary.kill()  # mid-conversation: calls are running, leases are held
        await anyio.sleep(world.rng.uniform(0.0, 1.0))
        await anyio.to_thread.run_sync(pair.standby.promote)
        world.promoted = True
        with anyio.fail_after(seconds(60)):
            while world.runs_after < 5:  # noqa: ASYNC110 (the workers' progress)
                await anyio.sleep(0.05)
        stop.set()
    assert before > 0  # calls ran before the failover
    assert [n for n, runs in world.runs.items() if runs > 1] == []
    assert world.twice == []
    assert set(world.fates.values()) <= {"ok", "rejected", "duplicate", "orphaned"}
