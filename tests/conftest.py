"""What the whole suite shares: Hypothesis profiles, the slow tests' place in the run, and the
servers one pytest process (one xdist worker) starts once for every test that only connects.

A test that changes an emulator (its scenario, faults, model, options) or reads what it saw
(``transcript``, ``violations``, ``sessions``, ``settled()``) starts its own: those belong to
the emulator's whole life, and a shared one's would hold every other test's connections too.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest

from livebridge.emulator import Emulator
from tests.support import hypothesis_profiles
from tests.support.gpt_live_sessions import MODEL as GPT_LIVE_MODEL
from tests.support.postgres_server import postgres_server
from tests.support.redis_server import redis_server
from tests.support.timing import UNIT, seconds

__all__ = [
    "gemini_emulator",
    "gpt_live_emulator",
    "openai_emulator",
    "postgres_server",
    "redis_server",
]

hypothesis_profiles.load()


def _on_a_thread_of_its_own(step: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run ``step()`` (a coroutine function) to completion in a new event loop on a new thread.

    The emulator serves from a thread of its own, so starting and stopping it needs no loop of
    the test's: doing both here keeps a session-wide fixture out of pytest-asyncio's loops
    (function, module or session scoped alike, with xdist or without) and leaves no loop set on
    the main thread.
    """
    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(step())
        except BaseException as error:  # re-raised on the caller's thread
            failure.append(error)

    thread = threading.Thread(target=run, name="test-emulator-lifecycle")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]


def _serving(emulator: Emulator) -> Iterator[Emulator]:
    _on_a_thread_of_its_own(emulator.start)
    try:
        yield emulator
    finally:
        _on_a_thread_of_its_own(emulator.stop)


@pytest.fixture(scope="session")
def gemini_emulator() -> Iterator[Emulator]:
    """One Gemini Live emulator (the default rule model) for the tests that only connect."""
    yield from _serving(Emulator())


@pytest.fixture(scope="session")
def openai_emulator() -> Iterator[Emulator]:
    """One OpenAI Realtime emulator for the tests that only connect."""
    yield from _serving(Emulator(protocol="openai"))


@pytest.fixture(scope="session")
def gpt_live_emulator() -> Iterator[Emulator]:
    """One GPT-Live emulator for the tests that only connect."""
    yield from _serving(Emulator(model=GPT_LIVE_MODEL))


def scale_timeouts(config: pytest.Config, items: list[pytest.Item]) -> None:
    """pytest-timeout's limit for each test (the ini's, or its own mark's) in the time unit."""
    default = float(config.getini("timeout") or 0)
    for item in items:
        marked = item.get_closest_marker("timeout")
        limit = float(marked.args[0]) if marked is not None and marked.args else default
        if limit:
            item.add_marker(pytest.mark.timeout(seconds(limit)), append=False)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Scale each test's time limit by the tests' time unit; under xdist, put the slow tests
    first in each worker's share of the run.

    ``--dist worksteal`` hands each worker one contiguous share of the collected tests and lets
    idle workers steal from the end of the others' shares. Collected in folder order, the
    longest tests (the benchmarks, the install, the demo from a fresh clone) came last and ran
    on after every other test had finished; spread module by module over the shares' fronts
    they run beside the short ones instead. Every worker collects the same list and sorts it
    the same way.
    """
    if UNIT != 1:
        scale_timeouts(config, items)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers < 2:
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if not slow:
        return
    # A module's slow tests stay together, in order, on one worker: its module-scoped fixtures
    # are set up once, and tests that measure (the benchmarks) never run beside each other.
    by_module: dict[str, list[pytest.Item]] = {}
    for item in slow:
        by_module.setdefault(item.nodeid.split("::")[0], []).append(item)
    fronts: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for module_items in by_module.values():
        min(fronts, key=len).extend(module_items)
    rest = iter([item for item in items if not item.get_closest_marker("slow")])
    ordered: list[pytest.Item] = []
    remaining = len(items)
    for share, front in enumerate(fronts):
        size = remaining // (workers - share)  # as worksteal first splits the run
        remaining -= size
        ordered += front
        ordered += [item for _, item in zip(range(size - len(front)), rest, strict=False)]
    ordered += list(rest)
    items[:] = ordered
