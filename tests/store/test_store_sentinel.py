"""``RedisStore`` through Redis Sentinel (docs/store.md's example): a master, its replica and a
sentinel, all real; the store follows a failover the sentinel carries out."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis.asyncio

from livebridge.errors import StoreUnavailableError
from livebridge.store import Entry, RedisStore
from tests.support.prometheus_server import free_port
from tests.support.system_packages import require
from tests.support.timing import seconds
from tests.test_readme import python_blocks


class RedisProcess:
    """``redis-server`` with a config file of its own (a sentinel rewrites its file)."""

    def __init__(self, *lines: str, sentinel: bool = False) -> None:
        self.port = free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="livebridge-sentinel-"))
        config = self.directory / "redis.conf"
        config.write_text(
            "\n".join(
                [f"port {self.port}", "bind 127.0.0.1", 'save ""', f"dir {self.directory}", *lines]
            )
            + "\n"
        )
        command = [require("redis-server", "redis-server"), str(config)]
        self.process = subprocess.Popen(
            [*command, "--sentinel"] if sentinel else command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def close(self) -> None:
        self.process.kill()
        self.process.wait(timeout=seconds(30))
        shutil.rmtree(self.directory, ignore_errors=True)


@dataclass
class Deployment:
    master: RedisProcess
    replica: RedisProcess
    sentinel: RedisProcess

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.sentinel.port}/books/0"


@pytest.fixture
def deployment() -> Iterator[Deployment]:
    master = RedisProcess()
    replica = RedisProcess(f"replicaof 127.0.0.1 {master.port}")
    sentinel = RedisProcess(
        f"sentinel monitor books 127.0.0.1 {master.port} 1",
        "sentinel down-after-milliseconds books 1000",
        "sentinel failover-timeout books 10000",
        sentinel=True,
    )
    try:
        yield Deployment(master, replica, sentinel)
    finally:
        for process in (sentinel, replica, master):
            process.close()


def docs_store(url: str) -> RedisStore:
    """The store of docs/store.md's Sentinel example, pointed at ``url``."""
    page = Path(__file__).resolve().parents[2] / "docs" / "store.md"
    (code,) = [
        b.code for b in python_blocks(page.read_text()) if b.section == "Which store survives what"
    ]
    namespace: dict[str, Any] = {}
    exec(
        code.replace("redis+sentinel://:secret@s1:26379,s2:26379,s3:26379/books/0", url), namespace
    )
    store: RedisStore = namespace["store"]
    assert store.url == url
    return store


async def ask(client: redis.asyncio.Redis, *args: object) -> Any:
    """One command (redis-py leaves ``execute_command`` untyped)."""
    return await client.execute_command(*args)  # type: ignore[no-untyped-call]


async def until_true(probe: redis.asyncio.Redis, command: str, *args: str) -> object:
    """Ask until the server answers (it is starting) and the answer is truthy."""
    with anyio.fail_after(seconds(30)):
        while True:
            try:
                answer = await ask(probe, command, *args)
                if answer:
                    return answer
            except (redis.exceptions.ConnectionError, redis.exceptions.ResponseError):
                pass
            await anyio.sleep(0.05)


@pytest.mark.slow
async def test_the_store_follows_a_sentinel_failover(deployment: Deployment) -> None:
    sentinel = redis.asyncio.Redis(port=deployment.sentinel.port, decode_responses=True)
    master = redis.asyncio.Redis(port=deployment.master.port)
    store = docs_store(deployment.url)
    try:
        await until_true(sentinel, "SENTINEL", "REPLICAS", "books")  # it found the replica
        with anyio.fail_after(seconds(30)):
            while True:  # until the sentinel has seen the master answer as one
                try:
                    lease = await store.acquire("c", "w1", 30.0)
                    break
                except StoreUnavailableError as exc:
                    assert "No master found" in str(exc)
                    await anyio.sleep(0.05)
        entry = Entry("a", "book", "req-a", "started", 0, "w1", time.time())
        await store.begin("c", lease, entry)
        assert await ask(master, "WAIT", 1, 5000) == 1  # the replica has it
        await until_true(sentinel, "SENTINEL", "FAILOVER", "books")
        with anyio.fail_after(seconds(30)):
            while True:  # the store asks the sentinel again once the old master refuses
                address = await ask(sentinel, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "books")
                try:
                    if int(address[1]) == deployment.replica.port:
                        await store.begin("c", lease, entry)
                        break
                except StoreUnavailableError:
                    pass
                await anyio.sleep(0.05)
        assert (await store.load("c")).entries == [entry]
        assert await store.renew("c", lease, 30.0)  # the lease was replicated before
        replica = redis.asyncio.Redis(port=deployment.replica.port)
        assert (await replica.info("replication"))["role"] == "master"
        await replica.aclose()
    finally:
        await store.aclose()
        await sentinel.aclose()
        await master.aclose()


def test_a_bad_sentinel_url_is_refused() -> None:
    with pytest.raises(ValueError, match="is not a Sentinel URL"):
        RedisStore("redis+sentinel://127.0.0.1/books")
    with pytest.raises(ValueError, match="is not a Sentinel URL"):
        RedisStore("redis+sentinel://127.0.0.1:26379")
