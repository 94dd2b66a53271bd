"""How many Python frames one tool call costs the tool core: a count that no timing noise moves.

A Python-level call is several hundred machine instructions before it does anything, so the
hot path of a plain call (no observers, no journal, no limiter of its own, no approval) keeps
the work of one-line functions inline: the session's slot, a call's finish, the callback, the
registry's and the answers' look-ups, whether a shared cancel scope was touched, the fates and
the ``waiting`` count a reporter reads. These tests count every Python frame entered
(``sys.setprofile``) per call, the handler's included, and hold those figures
(benchmarks/PROFILE.md, the tool core).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import Any

from livebridge import Call, CallPolicy, Dispatcher, ToolRegistry
from tests.calls.test_ledger import blocking, new_ledger, ok, send

BATCH, BATCHES = 64, 4


class Frames:
    """Python frames entered while installed as the profile function."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            self.count += 1


async def frames_of(work: Callable[[], Awaitable[None]]) -> int:
    frames = Frames()
    sys.setprofile(frames)
    try:
        await work()
    finally:
        sys.setprofile(None)
    return frames.count


async def test_a_plain_call_costs_the_dispatcher_nine_python_frames_at_most() -> None:
    tools = ToolRegistry()

    @tools.tool
    async def noop(i: int) -> None:
        """Do nothing."""

    policy = CallPolicy(max_parallel=BATCH, max_calls_per_turn=BATCH)
    dispatcher = Dispatcher(tools, policy=policy)
    batches = [
        [Call(f"{b}-{i}", "noop", {"i": i}) for i in range(BATCH)] for b in range(BATCHES + 1)
    ]
    await dispatcher.run(batches[0])  # warm: the first batch makes the starter

    async def work() -> None:
        for calls in batches[1:]:
            outcomes = await dispatcher.run(calls)
            assert {outcome.kind for outcome in outcomes} == {"ok"}

    per_call = await frames_of(work) / (BATCHES * BATCH)
    # Planning, the eager start, running (the handler's own frame), its answer,
    # settling, remembering its answer and its request: 8.4 (19.7 before the tool core's
    # inline paths, benchmarks/PROFILE.md).
    assert per_call <= 9


def test_a_blocking_call_costs_the_ledger_five_python_frames_at_most() -> None:
    ledger = new_ledger()
    turns = [[blocking(f"{t}-{i}") for i in range(8)] for t in range(50)]
    answers = [[ok(live_call.call.id) for live_call in live_calls] for live_calls in turns]
    frames = Frames()
    sys.setprofile(frames)
    try:
        for t, live_calls in enumerate(turns):
            ledger.receive(live_calls, now=float(t))
            for outcome in answers[t]:
                ledger.settle(outcome)
                assert ledger.waiting == 0  # a reporter's look before the answers leave
            assert send(ledger, now=float(t)) is not None
            ledger.server_message()
            assert ledger.waiting == 0  # the message reports its answers: nothing to take
            assert ledger.take_fates() == []
    finally:
        sys.setprofile(None)
    per_call = frames.count / (50 * 8)
    # A settle and an answer's encoding each, the rest shared by the turn's eight: 4.3 (8.5
    # before: a property per look at ``waiting``, a move and a fate method per call).
    assert per_call <= 5
