"""Randomized store faults: two workers race for one conversation while a real Redis is
frozen (longer and shorter than the lease), killed and restarted. Invariants: no request runs
twice while Redis kept its data, and every admitted call has exactly one fate."""

from __future__ import annotations

import random

import pytest

from benchmarks.bench_store_pause import World, race
from tests.support.redis_server import RedisServer


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
async def test_no_request_runs_twice_under_store_faults(
    redis_server: RedisServer, seed: int
) -> None:
    world = World(redis_server, random.Random(seed))
    await race(world, 6.0)
    assert world.doubles == []
    assert world.twice == []
    assert sum(world.runs.values()) > 0  # calls did run between the faults
    assert world.faults["pause"] > 0
    assert set(world.fates.values()) <= {"ok", "rejected", "duplicate", "orphaned"}
