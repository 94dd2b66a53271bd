"""A process that uses a ``RedisLimiter``, for the cross-process limiter tests.

``hammer URL NAME CAPACITY N HOLD``: N times take a slot, count itself in ``active`` (a Redis
counter), hold it HOLD seconds, uncount, give it back; prints ``{"peak": P, "done": N}``.
``hold URL NAME CAPACITY``: take every slot, print ``held``, and wait to be killed.
"""

from __future__ import annotations

import json
import sys

import anyio
import redis.asyncio

from livebridge.store import RedisLimiter


async def hammer(url: str, name: str, capacity: int, times: int, hold: float) -> None:
    counter = redis.asyncio.Redis.from_url(url)
    peak = 0
    async with RedisLimiter(url, name, capacity, lease=5.0) as limiter:
        for _ in range(times):
            borrower = object()
            await limiter.acquire_on_behalf_of(borrower)
            try:
                peak = max(peak, int(await counter.incr(f"{name}:active")))
                await anyio.sleep(hold)
                await counter.decr(f"{name}:active")
            finally:
                limiter.release_on_behalf_of(borrower)
    await counter.aclose()
    print(json.dumps({"peak": peak, "done": times}), flush=True)


async def hold(url: str, name: str, capacity: int) -> None:
    async with RedisLimiter(url, name, capacity, lease=1.0) as limiter:
        for _ in range(capacity):
            await limiter.acquire_on_behalf_of(object())
        print("held", flush=True)
        await anyio.sleep_forever()


def main(argv: list[str]) -> None:
    mode, url, name, capacity = argv[0], argv[1], argv[2], int(argv[3])
    if mode == "hammer":
        anyio.run(hammer, url, name, capacity, int(argv[4]), float(argv[5]))
    else:
        anyio.run(hold, url, name, capacity)


if __name__ == "__main__":
    main(sys.argv[1:])
