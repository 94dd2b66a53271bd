"""A scripted tool-call workload with a known mix of every outcome, and what it must count.

``drive_workload`` runs real calls through a ``Dispatcher`` (ok, error, timeout, cancelled,
rejected for each reason, duplicate, truncated, deduplicated) and adds the events a session
contributes (answers sent, an orphaned call, session open/close, reconnects, wire messages). It
returns the counts any observer should arrive at, derived from the plan, not from the run.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio

from livebridge.calls.call import Behavior, Call, DedupReason, Outcome
from livebridge.calls.dispatch import Dispatcher
from livebridge.calls.endings import FateKind, OutcomeKind
from livebridge.calls.observers import (
    AnswerSent,
    CallOrphaned,
    MessageSeen,
    Observer,
    Reconnected,
    SessionClosed,
    SessionOpened,
    emit,
)
from livebridge.calls.policy import CallPolicy
from livebridge.calls.tools import ToolRegistry

UNKNOWN_FUNCTION = "launch_rockets"
POLICY = CallPolicy(max_parallel=8, max_calls_per_turn=6, timeout=10.0, max_result_bytes=256)

#: Wire messages the session reports: (direction, kind). ``mysteryField`` counts as ``other``.
MESSAGES: tuple[tuple[str, str], ...] = (
    ("sent", "setup"),
    ("received", "setupComplete"),
    ("sent", "realtimeInput"),
    ("received", "serverContent"),
    ("received", "toolCall"),
    ("sent", "toolResponse"),
    ("received", "toolCall"),
    ("sent", "toolResponse"),
    ("sent", "toolResponse"),
    ("received", "toolCall"),
    ("received", "toolCallCancellation"),
    ("received", "goAway"),
    ("received", "sessionResumptionUpdate"),
    ("received", "mysteryField"),
)
TOOL_NAMES = ("get_weather", "search_docs", "lookup_order", "slow_report", "book_table", "hold")
RECONNECTS = ("go_away", "dropped", "stars_misaligned")
_sessions = itertools.count(1)


@dataclass(frozen=True)
class Planned:
    """One call of the script and how it must end."""

    call: Call
    kind: OutcomeKind | FateKind
    runs: bool = False  # its handler starts (a CallStarted event)
    reason: str | None = None  # rejection reason
    truncated: bool = False
    dedup: DedupReason | None = None


@dataclass
class Expected:
    """What one ``drive_workload`` run must add to the metrics (function labels already folded)."""

    calls: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    handler_runs: Counter[str] = field(default_factory=Counter)
    turnarounds: Counter[tuple[str, str]] = field(default_factory=Counter)
    ok_results: Counter[str] = field(default_factory=Counter)
    rejections: Counter[tuple[str, str]] = field(default_factory=Counter)
    truncations: Counter[str] = field(default_factory=Counter)
    dedups: Counter[tuple[str, str]] = field(default_factory=Counter)
    cancellations: Counter[str] = field(default_factory=Counter)
    orphans: Counter[str] = field(default_factory=Counter)
    batch_sizes: list[int] = field(default_factory=list)
    sessions_active: int = 0
    reconnects: Counter[str] = field(default_factory=Counter)
    messages: Counter[tuple[str, str]] = field(default_factory=Counter)


def build_tools(hold_started: anyio.Event) -> ToolRegistry:
    """The workload's tools; ``hold`` sets ``hold_started`` and then waits to be cancelled."""
    tools = ToolRegistry()
    never = anyio.Event()

    @tools.tool(idempotent=True)
    async def get_weather(city: str) -> dict[str, object]:
        return {"city": city, "celsius": 21}

    @tools.tool(idempotent=True)
    async def search_docs(query: str) -> str:
        return f"{query}: " + "lorem ipsum " * 200

    @tools.tool
    async def lookup_order(order_id: int) -> dict[str, object]:
        raise ValueError(f"no order {order_id}")

    @tools.tool(timeout=0.05)
    async def slow_report() -> str:
        await never.wait()
        return "never"

    @tools.tool(behavior="NON_BLOCKING")
    async def book_table(restaurant: str, people: int) -> dict[str, object]:
        return {"restaurant": restaurant, "people": people, "confirmed": True}

    @tools.tool(behavior="NON_BLOCKING", idempotent=True)
    async def hold(ticket: str) -> str:
        hold_started.set()
        await never.wait()
        return ticket

    return tools


TURNS: tuple[tuple[Planned, ...], ...] = (
    (
        Planned(Call("c1", "get_weather", {"city": "Paris"}), "ok", runs=True),
        Planned(Call("c2", "get_weather", {"city": "Paris"}), "ok", dedup="twin"),
        Planned(Call("c3", "search_docs", {"query": "refunds"}), "ok", runs=True, truncated=True),
        Planned(Call("c4", "lookup_order", {"order_id": -1}), "error", runs=True),
        Planned(
            Call("c5", "lookup_order", {"order_id": "abc"}), "rejected", reason="invalid_arguments"
        ),
        Planned(Call("c6", UNKNOWN_FUNCTION, {}), "rejected", reason="unknown_function"),
    ),
    (
        Planned(Call("c7", "slow_report", {}), "timeout", runs=True),
        Planned(Call("c8", "book_table", {"restaurant": "Noma", "people": 2}), "ok", runs=True),
        Planned(
            Call("c9", "book_table", {"restaurant": "Noma", "people": 2}), "duplicate", dedup="twin"
        ),
        Planned(Call("c10", "get_weather", {"city": "Rome"}), "ok", runs=True),
        Planned(Call("c11", "get_weather", {"city": "Oslo"}), "ok", runs=True),
        Planned(Call("c12", "get_weather", {"city": "Lima"}), "ok", runs=True),
        Planned(Call("c13", "get_weather", {"city": "Kyiv"}), "rejected", reason="fanout_limit"),
    ),
    (Planned(Call("c14", "hold", {"ticket": "t1"}), "cancelled", runs=True),),
)
#: A call the session could not answer before its socket went away.
ORPHAN = Planned(Call("c15", "get_weather", {"city": "Quito"}), "orphaned")


async def drive_workload(observers: Sequence[Observer]) -> Expected:
    """Run the script once, as a fresh session, reporting to ``observers``."""
    session_id = f"workload-{next(_sessions)}"
    hold_started = anyio.Event()
    tools = build_tools(hold_started)
    assert tuple(tools.names()) == TOOL_NAMES
    dispatcher = Dispatcher(tools, policy=POLICY, observers=observers, session_id=session_id)
    emit(observers, SessionOpened(session_id))
    emit(observers, SessionOpened(f"{session_id}-peer"))
    for direction, kind in MESSAGES:
        emit(observers, MessageSeen(session_id, direction, kind))  # type: ignore[arg-type]

    for turn, planned in enumerate(TURNS[:2], start=1):
        received = time.monotonic()
        outcomes = await dispatcher.run([p.call for p in planned], turn=turn)
        _check_outcomes(planned, outcomes)
        _answer(observers, session_id, tools, outcomes, received)

    async with anyio.create_task_group() as tg:
        cancel_turn = TURNS[2]

        async def run_cancelled() -> None:
            outcomes = await dispatcher.run([p.call for p in cancel_turn], turn=3)
            _check_outcomes(cancel_turn, outcomes)

        tg.start_soon(run_cancelled)
        await hold_started.wait()
        assert dispatcher.cancel("c14")

    emit(
        observers,
        CallOrphaned(session_id, ORPHAN.call.id, ORPHAN.call.name, "BLOCKING", "dropped", True),
    )
    for reason in RECONNECTS:
        emit(observers, Reconnected(session_id, reason))
    emit(observers, SessionClosed(f"{session_id}-peer", "done"))
    return expected_counts(tools)


def _check_outcomes(planned: Sequence[Planned], outcomes: Sequence[Outcome]) -> None:
    got = [(o.call_id, o.kind, o.truncated) for o in outcomes]
    want = [(p.call.id, p.kind, p.truncated) for p in planned]
    assert got == want, f"the dispatcher did not follow the script: {got} != {want}"


def _answer(
    observers: Sequence[Observer],
    session_id: str,
    tools: ToolRegistry,
    outcomes: Sequence[Outcome],
    received: float,
) -> None:
    """Report answers as a session would: blocking ones in one send, the others in another."""
    for behavior in ("BLOCKING", "NON_BLOCKING"):
        sent = [o for o in outcomes if _behavior(tools, o.name) == behavior]
        if sent:
            turnaround = time.monotonic() - received
            event = AnswerSent(
                session_id,
                sent,
                [turnaround] * len(sent),
                [behavior] * len(sent),
                [o.name in tools for o in sent],
            )
            emit(observers, event)


def _behavior(tools: ToolRegistry, name: str) -> Behavior:
    tool = tools.get(name)
    return tool.behavior if tool is not None else "BLOCKING"


def expected_counts(tools: ToolRegistry) -> Expected:
    """The counts one run adds, derived from ``TURNS``, ``ORPHAN`` and the session events."""
    expected = Expected()
    for planned in [p for turn in TURNS for p in turn] + [ORPHAN]:
        name = planned.call.name
        function = name if name in tools else "other"
        behavior = _behavior(tools, name)
        if planned.kind != "orphaned":  # a fate, counted apart from handler outcomes
            expected.calls[function, planned.kind, behavior] += 1
        if planned.runs:
            expected.handler_runs[function] += 1
        if planned.kind not in ("cancelled", "orphaned"):
            expected.turnarounds[function, behavior] += 1
        if planned.kind == "ok":
            expected.ok_results[function] += 1
        if planned.reason is not None:
            expected.rejections[function, planned.reason] += 1
        if planned.truncated:
            expected.truncations[function] += 1
        if planned.dedup is not None:
            expected.dedups[function, planned.dedup] += 1
        if planned.kind == "cancelled":
            expected.cancellations[function] += 1
        if planned.kind == "orphaned":
            expected.orphans[function] += 1
    expected.batch_sizes = [len(turn) for turn in TURNS]
    expected.sessions_active = 1
    expected.reconnects = Counter(r if r in ("go_away", "dropped") else "other" for r in RECONNECTS)
    expected.messages = Counter((d, "other" if k == "mysteryField" else k) for d, k in MESSAGES)
    return expected
