"""``RedisLimiter`` across real processes sharing a real redis-server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
import redis.asyncio

from livebridge import CallPolicy, LiveSession, ToolRegistry
from livebridge.calls.call import Call
from livebridge.calls.dispatch import Dispatcher
from livebridge.emulator import Emulator
from livebridge.errors import UsageError
from livebridge.protocol.events import ToolCallSettled, TurnComplete
from livebridge.store import RedisLimiter
from tests.store.test_store_session import Booking
from tests.support.gemini_sessions import MODEL, TEXT_CONFIG, collect_until, errors, of_type
from tests.support.redis_server import RedisServer
from tests.support.timing import seconds

ROOT = Path(__file__).resolve().parents[2]


def worker(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.limiter_process", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_three_processes_never_exceed_the_capacity(redis_server: RedisServer) -> None:
    url = redis_server.url
    workers = [worker("hammer", url, "api", "2", "25", "0.01") for _ in range(3)]
    reports = []
    for process in workers:
        out, err = process.communicate(timeout=seconds(120))
        assert process.returncode == 0, err
        reports.append(json.loads(out))
    assert [r["done"] for r in reports] == [25, 25, 25]
    peaks = [r["peak"] for r in reports]
    assert max(peaks) == 2, peaks  # the limit was reached, never exceeded


def test_slots_of_a_killed_process_come_back_after_their_lease(redis_server: RedisServer) -> None:
    url = redis_server.url
    holder = worker("hold", url, "db", "2")
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        os.kill(holder.pid, signal.SIGKILL)
        holder.communicate(timeout=seconds(30))
        killed = time.monotonic()
        taker = worker("hammer", url, "db", "2", "2", "0")
        out, err = taker.communicate(timeout=seconds(60))
        assert taker.returncode == 0, err
        assert json.loads(out)["done"] == 2
        assert time.monotonic() - killed < seconds(30)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.communicate()


async def test_dispatcher_runs_under_a_shared_limiter(redis_server: RedisServer) -> None:
    tools = ToolRegistry()
    running: list[int] = []
    peak: list[int] = [0]

    @tools.tool(idempotent=True)
    async def lookup(n: int) -> int:
        running.append(n)
        peak[0] = max(peak[0], len(running))
        await anyio.sleep(0.05)
        running.remove(n)
        return n

    async with RedisLimiter(redis_server.url, "lookups", 2) as limiter:
        dispatcher = Dispatcher(tools, CallPolicy(limiter=limiter))
        outcomes = await dispatcher.run([Call(f"c{i}", "lookup", {"n": i}) for i in range(6)])
        assert [o.response for o in outcomes] == [{"output": i} for i in range(6)]
        assert peak[0] == 2
        assert limiter.borrowed_tokens == 0
    client = redis.asyncio.Redis.from_url(redis_server.url)
    assert await client.zcard(limiter.key) == 0  # every slot was given back on exit
    await client.aclose()


async def test_redis_down_refuses_the_call_without_running_it(redis_server: RedisServer) -> None:
    tools = ToolRegistry()
    ran: list[str] = []

    @tools.tool
    async def charge(amount: int) -> str:
        ran.append("charge")
        return "ok"

    async with RedisLimiter(redis_server.url, "pay", 1, timeout=0.3) as limiter:
        redis_server.stop()
        dispatcher = Dispatcher(tools, CallPolicy(limiter=limiter))
        (outcome,) = await dispatcher.run([Call("c1", "charge", {"amount": 5})])
    assert ran == []
    assert outcome.kind == "rejected"
    error = outcome.response["error"]
    assert error["type"] == "store_unavailable"
    assert error["retryable"] is True
    assert "did not answer acquire" in error["message"] or "failed acquire" in error["message"]


async def test_a_limiter_used_on_its_own_starts_itself(redis_server: RedisServer) -> None:
    limiter = RedisLimiter(redis_server.url, "x", 1)
    await limiter.acquire_on_behalf_of("b1")  # no `async with`: it starts on first use
    assert limiter.running and limiter.borrowed_tokens == 1
    await limiter.aclose()  # gives its slots back
    client = redis.asyncio.Redis.from_url(redis_server.url)
    assert await client.zcard(limiter.key) == 0
    await client.aclose()
    with pytest.raises(ValueError, match="capacity"):
        RedisLimiter("redis://127.0.0.1:1/0", "x", 0)


async def test_sessions_start_and_stop_a_limiter_they_use(redis_server: RedisServer) -> None:
    """``CallPolicy(limiter=RedisLimiter(...))`` without ``async with``: the calls run under
    it, and the last session using it stops it."""
    app = Booking()
    limiter = RedisLimiter(redis_server.url, "bookings", 1)
    policy = CallPolicy(limiter=limiter)
    async with Emulator() as emu:

        async def one(city: str) -> list[ToolCallSettled]:
            async with LiveSession.connect(
                emu.client(), model=MODEL, tools=app.tools, config=TEXT_CONFIG, policy=policy
            ) as session:
                assert limiter.running
                await session.send_text(f"Book in {city}")
                events = await collect_until(session, lambda e: isinstance(e, TurnComplete))
            return of_type(events, ToolCallSettled)

        settled: list[ToolCallSettled] = []

        async def run(city: str) -> None:
            settled.extend(await one(city))

        async with anyio.create_task_group() as tg:
            for city in ("Paris", "Rome"):
                tg.start_soon(run, city)
        await emu.settled()
        assert errors(emu) == []
    assert sorted(app.booked) == ["Paris", "Rome"]
    assert [s.outcome for s in settled] == ["ok"] * 4
    assert not limiter.running  # stopped with the last session


async def test_a_limiter_that_cannot_work_fails_connect_not_the_calls() -> None:
    app = Booking()
    policy = CallPolicy(limiter=RedisLimiter("redis://127.0.0.1:1/0", "x", 1, timeout=0.3))
    async with Emulator() as emu:
        with pytest.raises(UsageError, match=r"RedisLimiter .x. cannot work: .*Redis is up"):
            async with LiveSession.connect(
                emu.client(), model=MODEL, tools=app.tools, config=TEXT_CONFIG, policy=policy
            ):
                pass
        await emu.settled()
        assert emu.sessions == []  # refused before any socket to the service opened
    assert app.booked == []
