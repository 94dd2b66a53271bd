"""The concurrency limits a handler runs under: its tool's, the process-wide one, the session's.

Each call takes a slot of every limit that applies, in one order (the tool's ``max_concurrency``,
then ``CallPolicy.limiter``, then the dispatcher's own ``max_parallel``), and gives them back in
the reverse order once its handler really ended (``threads.ThreadSlots`` for a sync handler).
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from livebridge.calls.policy import CallPolicy
from livebridge.calls.threads import LocalSlots, SlotLimiter
from livebridge.calls.tools import Tool

__all__ = ["Limits", "release", "take_free"]


class Limits:
    """The limiters of one dispatcher's tools, looked up once per tool."""

    __slots__ = ("_by_tool", "_own", "_shared")

    def __init__(self, policy: CallPolicy) -> None:
        self._own = LocalSlots(policy.max_parallel)
        self._shared = policy.limiter
        self._by_tool: dict[str, tuple[SlotLimiter, ...]] = {}

    def of(self, tool: Tool) -> tuple[SlotLimiter, ...]:
        """Per-tool, then process-wide, then this dispatcher's, in the order they are taken."""
        limiters = self._by_tool.get(tool.name)
        if limiters is None:
            candidates = (tool.limiter, self._shared, self._own)
            limiters = tuple(x for x in candidates if x is not None)
            self._by_tool[tool.name] = limiters
        return limiters


def take_free(limiters: Sequence[SlotLimiter], borrower: object) -> int:
    """Take each limiter in turn while it is free at once; returns how many are held (all of
    them, as a rule). If taking one fails, those before it are given back and it raises."""
    for held, limiter in enumerate(limiters):
        try:
            limiter.acquire_on_behalf_of_nowait(borrower)
        except anyio.WouldBlock:
            return held
        except BaseException:
            release(limiters[:held], borrower)
            raise
    return len(limiters)


def release(acquired: Sequence[SlotLimiter], borrower: object) -> None:
    """Give back what ``borrower`` holds, the last taken first."""
    for limiter in reversed(acquired):
        limiter.release_on_behalf_of(borrower)
