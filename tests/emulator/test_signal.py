"""``Signal`` wakes a waiter on another thread's event loop at once (an ``asyncio.Event`` set
from there leaves the waiter asleep until its loop wakes for something else). The loops here
have nothing else to wake them: a missed wake-up is a timeout, not a late pass."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from livebridge.emulator import Signal
from tests.support.timing import seconds


def on_another_loop(main: Callable[[], Coroutine[Any, Any, None]]) -> threading.Thread:
    """Run ``main`` on a fresh event loop in a thread of its own, as the emulator runs a
    scenario."""
    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    return thread


async def test_a_waiter_on_this_loop_wakes_when_another_thread_sets_it() -> None:
    signal = Signal()
    on_another_loop(_set_soon(signal))
    await asyncio.wait_for(signal.wait(), seconds(10))
    assert signal.is_set()


async def _set(signal: Signal) -> None:
    signal.set()


def _set_soon(signal: Signal) -> Callable[[], Coroutine[Any, Any, None]]:
    return lambda: _set(signal)


async def test_a_waiter_on_another_loop_wakes_when_this_loop_sets_it() -> None:
    signal, woke = Signal(), threading.Event()
    waiting = threading.Event()

    async def waiter() -> None:
        task = asyncio.ensure_future(signal.wait())
        await asyncio.sleep(0)  # registered
        waiting.set()
        await asyncio.wait_for(task, seconds(10))
        woke.set()

    thread = on_another_loop(waiter)
    await asyncio.to_thread(waiting.wait, seconds(10))
    signal.set()
    await asyncio.to_thread(thread.join, seconds(10))
    assert woke.is_set()


async def test_many_waiters_on_both_loops_and_a_late_waiter_all_return() -> None:
    signal, done = Signal(), threading.Event()

    async def waiters() -> None:
        await asyncio.wait_for(asyncio.gather(*(signal.wait() for _ in range(3))), seconds(10))
        done.set()

    thread = on_another_loop(waiters)
    here = [asyncio.ensure_future(signal.wait()) for _ in range(3)]
    await asyncio.sleep(0)
    signal.set()
    signal.set()  # again: nothing more happens
    await asyncio.wait_for(asyncio.gather(*here), seconds(10))
    await asyncio.to_thread(thread.join, seconds(10))
    assert done.is_set()
    await asyncio.wait_for(signal.wait(), seconds(1))  # already set: at once


async def test_a_waiter_whose_loop_closed_does_not_break_set() -> None:
    signal = Signal()

    async def leave_a_waiter() -> None:
        task = asyncio.ensure_future(signal.wait())
        await asyncio.sleep(0)
        task.cancel()  # the loop ends with the waiter gone

    thread = on_another_loop(leave_a_waiter)
    await asyncio.to_thread(thread.join, seconds(10))
    signal.set()
    assert signal.is_set()
