"""The dispatcher's own limiter: a count of free slots, handed to the waiters in turn."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from livebridge.calls.sync_handlers import LocalSlots


async def test_a_slot_given_back_goes_to_the_first_waiter_not_to_a_newcomer() -> None:
    slots = LocalSlots(1)
    slots.acquire_on_behalf_of_nowait("a")
    got: list[str] = []

    async def take(name: str) -> None:
        await slots.acquire_on_behalf_of(name)
        got.append(name)

    async with anyio.create_task_group() as tg:
        tg.start_soon(take, "b")
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(take, "c")
        await anyio.wait_all_tasks_blocked()
        slots.release_on_behalf_of("a")
        with pytest.raises(anyio.WouldBlock):  # handed to "b", not free for "d"
            slots.acquire_on_behalf_of_nowait("d")
        await anyio.wait_all_tasks_blocked()
        assert got == ["b"]
        slots.release_on_behalf_of("b")
    assert got == ["b", "c"]
    slots.release_on_behalf_of("c")
    slots.acquire_on_behalf_of_nowait("e")  # free again: nothing was lost on the way


async def test_a_waiter_cancelled_once_handed_a_slot_passes_it_on() -> None:
    slots = LocalSlots(1)
    slots.acquire_on_behalf_of_nowait("a")
    handed = asyncio.create_task(slots.acquire_on_behalf_of("b"))
    after = asyncio.create_task(slots.acquire_on_behalf_of("c"))
    await anyio.wait_all_tasks_blocked()
    slots.release_on_behalf_of("a")  # "b" is handed the slot ...
    handed.cancel()  # ... and cancelled before it could take it
    with pytest.raises(asyncio.CancelledError):
        await handed
    await after  # "c" has it
    with pytest.raises(anyio.WouldBlock):
        slots.acquire_on_behalf_of_nowait("d")
    slots.release_on_behalf_of("c")
    slots.acquire_on_behalf_of_nowait("d")


async def test_a_waiter_cancelled_in_the_queue_leaves_it() -> None:
    slots = LocalSlots(1)
    slots.acquire_on_behalf_of_nowait("a")
    waiting = asyncio.create_task(slots.acquire_on_behalf_of("b"))
    await anyio.wait_all_tasks_blocked()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    slots.release_on_behalf_of("a")  # nobody waits any more: the slot is free
    slots.acquire_on_behalf_of_nowait("c")
    with pytest.raises(anyio.WouldBlock):
        slots.acquire_on_behalf_of_nowait("d")
