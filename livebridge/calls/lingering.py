"""Handler tasks that outlive their answer, reaped when the dispatcher closes.

A handler that ignores its cancellation is answered ``timeout`` on time and *abandoned*: its
task runs on, holding its concurrency slots, until it really ends. ``reap`` gives such tasks a
grace period, cancels those still running, and counts the ones that ignore even that.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Set
from typing import Any

from livebridge.calls.plans import ABANDON_GRACE

log = logging.getLogger("livebridge.calls.dispatch")


async def reap(tasks: Set[asyncio.Task[Any]], grace: float) -> int:
    """Give ``tasks`` ``grace`` seconds, then cancel them; returns how many are left.

    Those left ignored their cancellation: they are logged, and keep their slots.
    """
    if not tasks:
        return 0
    _, left = await asyncio.wait(set(tasks), timeout=max(grace, 0.0))
    if left:
        for task in left:
            task.cancel()
        _, left = await asyncio.wait(left, timeout=ABANDON_GRACE)
    if left:
        log.warning("%d tool handler(s) still running after cancellation; abandoned", len(left))
    return len(left)
