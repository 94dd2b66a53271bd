"""The exactly-once contract under randomized faults, end to end.

Each seed draws a case (``tests/support/fault_world.py``): misbehaving handlers, a server that
closes, cancels, re-issues or repeats, an app that leaves mid-batch. A real ``LiveSession`` plays it
through the google-genai SDK against the emulator over TLS; then every invariant of the contract
is checked, and all broken ones are reported at once with the case that broke them. Reproduce
one case with ``pytest tests/test_contract_faults.py -k "seed_17]"``.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from prometheus_client import CollectorRegistry

from livebridge import CallPolicy, LiveSession, SessionOptions
from livebridge.calls.tools import ToolRegistry
from livebridge.emulator import Emulator
from livebridge.emulator.contract import Violation
from livebridge.emulator.shared import TranscriptEntry
from livebridge.errors import SessionEndedError
from livebridge.observe.metrics import PrometheusObserver
from livebridge.protocol.events import (
    Closed,
    SessionEvent,
    TextOut,
    ToolCallSettled,
    ToolCallStarted,
)
from tests.support.fault_world import (
    END,
    MALFORMED,
    MODELS,
    MODES,
    SERVER_FAULTS,
    TIMEOUTS,
    UNSERIALIZABLE,
    Case,
    World,
    draw_case,
)
from tests.support.gemini_sessions import TEXT_CONFIG, of_type

#: The seeds of the full run (CI's fixed budget); each is its own test, ``-k "seed_N]"`` picks
#: one. ``LIVEBRIDGE_FAULT_SEEDS=START:STOP`` sweeps another range, for a deeper search.
CI_SEEDS = "0:40"


def seed_range(ci_seeds: str) -> range:
    """The seeds to run: ``LIVEBRIDGE_FAULT_SEEDS`` if set, else CI's ``START:STOP``."""
    return range(*(int(n) for n in os.environ.get("LIVEBRIDGE_FAULT_SEEDS", ci_seeds).split(":")))


SEEDS = seed_range(CI_SEEDS)
#: Seeds whose cases hold every invariant on today's code: a quick guard for every change.
SMOKE_SEEDS = (9, 26, 27, 31)

GRACE = 1.0
#: Leaving the session may take ``GRACE`` plus this long (the contract says 1 s; load is slow).
LEAVE_SLACK = 2.5
#: An answer may leave this long after the slowest timeout of its case.
TURNAROUND_SLACK = 2.0
#: The whole script of one case, from connect to ``END`` (or ``Closed``).
CASE_BUDGET = 20.0
#: The service closes the connection with 1007 at about 1 MB per frame.
FRAME_LIMIT = 1 << 20

#: Violations of the client's contract that a server fault, not the client, can cause.
CAUSED_BY: dict[str, frozenset[str]] = {
    "close_1000": frozenset({"unanswered"}),
    "close_1006": frozenset({"unanswered"}),
    "close_1007": frozenset({"unanswered"}),
    "close_1008": frozenset({"unanswered"}),
    "close_1011": frozenset({"unanswered"}),
    "stale_handle": frozenset({"unanswered"}),
    "go_away": frozenset({"unanswered"}),  # the deadline may pass while a call runs
    "cancel_at_settle": frozenset({"cancelled_id"}),  # the answer crossed the cancellation
    "interrupted": frozenset({"unanswered"}),  # the service may drop the call silently
    "malformed:name_not_string": frozenset({"name_mismatch", "missing_name"}),
}


@dataclass(slots=True)
class Run:
    """What one case left behind: the app's events, the wire, the metrics, the timings."""

    case: Case
    world: World
    events: list[SessionEvent]
    transcript: list[TranscriptEntry]
    violations: list[Violation]
    known: dict[str, set[str]]  # connection -> every call id its checker knew
    scenario_errors: list[str]
    registry: CollectorRegistry
    leave_seconds: float
    finished: bool  # the app saw END or Closed within the budget
    error: BaseException | None


def set_up(
    case: Case,
) -> tuple[World, ToolRegistry, CollectorRegistry, PrometheusObserver, CallPolicy]:
    """The case's world, its tools, a metrics registry with its observer, and the policy."""
    world = World(case)
    tools = world.registry()
    registry = CollectorRegistry()
    metrics = PrometheusObserver(registry, functions=tools.names())
    policy = CallPolicy(
        max_parallel=case.max_parallel,
        max_calls_per_turn=8,
        timeout=TIMEOUTS["act"],
        max_result_bytes=case.max_result_bytes,
    )
    return world, tools, registry, metrics, policy


async def run_case(case: Case) -> Run:
    world, tools, registry, metrics, policy = set_up(case)
    options = SessionOptions(
        transport=case.transport, shutdown_grace=GRACE, reconnect_attempts=2, go_away_margin=0.5
    )
    async with Emulator(world.scenario) as emu:
        world.emulator = emu
        session = LiveSession.connect(
            emu.client(vertexai=case.vertex),
            model=case.model,
            tools=tools,
            config=TEXT_CONFIG,
            policy=policy,
            observers=[metrics],
            options=options,
        )
        return await drive(case, world, emu, session, registry)


async def drive(
    case: Case,
    world: World,
    emu: Emulator,
    opening: AbstractAsyncContextManager[LiveSession],
    registry: CollectorRegistry,
    again: Callable[[SessionEvent], bool] = lambda event: False,
) -> Run:
    """Say "go", read events until the case stops (``again``: the app speaks once more), leave,
    read the rest, and collect what the case left behind."""
    events: list[SessionEvent] = []
    finished = False
    error: BaseException | None = None
    left = time.monotonic()
    leave_seconds = 0.0
    try:
        try:
            async with opening as session:
                await session.send_text("go")
                with anyio.move_on_after(CASE_BUDGET):
                    async for event in session.events():
                        events.append(event)
                        if _stops(case, event):
                            finished = True
                            break
                        if again(event):
                            await session.send_text("again")
                    else:
                        finished = True
                left = time.monotonic()
        except SessionEndedError:  # ended on its own while the app read: the rest follows
            finished = True
            left = time.monotonic()
        leave_seconds = time.monotonic() - left
        while (rest := await session.next_event()) is not None:
            events.append(rest)
    except Exception as exc:
        error = exc
        leave_seconds = time.monotonic() - left
    finally:
        world.release()
    return Run(
        case=case,
        world=world,
        events=events,
        transcript=list(emu.transcript),
        violations=list(emu.violations),
        known={s.id: set(s.checker.calls) for s in emu.connections},
        scenario_errors=[e for s in emu.connections for e in s.errors],
        registry=registry,
        leave_seconds=leave_seconds,
        finished=finished,
        error=error,
    )


def _stops(case: Case, event: SessionEvent) -> bool:
    if isinstance(event, TextOut) and event.text == END:
        return True
    return case.leave_mid_batch and isinstance(event, ToolCallStarted)


# -- the invariants ----------------------------------------------------------------------------


def broken_invariants(run: Run) -> list[str]:
    """Every invariant of the contract the run broke, one readable line each."""
    return [
        *_session_ended(run),
        *_answers_on_the_wire(run),
        *_every_call_admitted(run),
        *_one_fate_per_admission(run),
        *_unserializable_results_are_errors(run),
        *_metrics_agree(run),
        *_handlers_ran_once_per_request(run),
        *_new_request_is_not_served_an_old_answer(run),
        *_timing(run),
        *_emulator_saw_no_breach(run),
    ]


def _session_ended(run: Run) -> Iterator[str]:
    if run.error is not None:
        yield f"the session raised {type(run.error).__name__}: {run.error}"
    if not run.finished:
        yield f"the app saw neither {END!r} nor Closed within {CASE_BUDGET:g} s"
    closed = [i for i, e in enumerate(run.events) if isinstance(e, Closed)]
    if len(closed) != 1 or closed[0] != len(run.events) - 1:
        yield f"the events must end with one Closed; Closed at {closed} of {len(run.events)}"


def _answers_on_the_wire(run: Run) -> Iterator[str]:
    asked: dict[str, set[str]] = {}
    finals: Counter[tuple[str, str]] = Counter()
    nameless_asked: Counter[tuple[str, str]] = Counter()  # (connection, function): calls
    nameless_answered: Counter[tuple[str, str]] = Counter()
    for entry in run.transcript:
        message = _message(entry)
        if entry.direction == "server":
            asked.setdefault(entry.session, set()).update(_asked_ids(message))
            for name in _asked_without_id(message):
                nameless_asked[entry.session, name] += 1
            continue
        responses = message.get("toolResponse", {}).get("functionResponses", [])
        size = len(json.dumps(message))
        if responses and size > FRAME_LIMIT:
            yield f"a toolResponse frame of {size} bytes is over the {FRAME_LIMIT} byte limit"
        for response in responses:
            if "id" not in response:  # answered by name: never more than were asked
                key = (entry.session, str(response.get("name")))
                nameless_answered[key] += not response.get("willContinue")
                if nameless_answered[key] > nameless_asked[key]:
                    yield f"{key[1]} answered by name on {key[0]} more often than asked"
                continue
            call_id = str(response.get("id"))
            key = (entry.session, call_id)
            if finals[key]:
                yield f"{call_id} answered again on {entry.session} after its final answer"
            if not response.get("willContinue"):
                finals[key] += 1
            knew = asked.get(entry.session, set()) | run.known.get(entry.session, set())
            if call_id not in knew:
                yield f"{call_id} answered on {entry.session}, which never asked for it"


def _every_call_admitted(run: Run) -> Iterator[str]:
    """Each valid call of the batch reaches the app, whatever its siblings look like (by its
    tag: a call without an id is known to the app by a key of the session's own)."""
    tags = {
        e.args.get("tag") for e in of_type(run.events, ToolCallStarted) if isinstance(e.args, dict)
    }
    settled = {e.call_id for e in of_type(run.events, ToolCallSettled)}  # fated, never run
    for tag, call_id in sorted(run.world.issued.ids.items()):
        if tag not in tags and call_id not in settled:
            yield f"{call_id} (#{tag}) was never admitted nor given a fate: the call was lost"


def _unserializable_results_are_errors(run: Run) -> Iterator[str]:
    modes = {run.world.issued.ids.get(c.tag): c.mode for c in run.case.calls}
    for event in of_type(run.events, ToolCallSettled):
        mode = modes.get(event.call_id)
        if mode in UNSERIALIZABLE and event.outcome == "ok":
            yield f"{event.call_id} returned a {mode} result, which was answered as ok"


def _one_fate_per_admission(run: Run) -> Iterator[str]:
    started = Counter(e.call_id for e in of_type(run.events, ToolCallStarted))
    settled = Counter(e.call_id for e in of_type(run.events, ToolCallSettled))
    for call_id in sorted(started.keys() | settled.keys()):
        if started[call_id] != settled[call_id]:
            fates = [e.ending for e in of_type(run.events, ToolCallSettled) if e.call_id == call_id]
            yield (
                f"{call_id}: admitted {started[call_id]} time(s) but {settled[call_id]} fate "
                f"event(s) {fates}"
            )


def gauges_at_zero(run: Run) -> Iterator[str]:
    """Once the session ended, no call is in flight and no session is active."""
    registry = run.registry
    if (in_flight := registry.get_sample_value("livebridge_tool_calls_in_flight")) != 0:
        yield f"livebridge_tool_calls_in_flight is {in_flight} after the session ended"
    if (active := registry.get_sample_value("livebridge_sessions_active")) != 0:
        yield f"livebridge_sessions_active is {active} after the session ended"


def _metrics_agree(run: Run) -> Iterator[str]:
    registry = run.registry
    yield from gauges_at_zero(run)
    counted: Counter[str] = Counter()
    for metric in registry.collect():
        for sample in metric.samples:
            if sample.name == "livebridge_tool_calls_total":
                counted[sample.labels["outcome"]] += int(sample.value)
    admitted = len(of_type(run.events, ToolCallStarted))
    if counted.total() != admitted:
        yield f"livebridge_tool_calls_total counts {dict(counted)}; {admitted} calls were admitted"
    settled = of_type(run.events, ToolCallSettled)
    answered = Counter(e.ending for e in settled if e.turnaround is not None)
    for outcome, count in answered.items():
        if counted[outcome] < count:
            yield f"{count} answers of outcome {outcome} sent, calls_total has {counted[outcome]}"
    orphans = sum(1 for e in settled if e.ending == "orphaned")
    total = sum(
        s.value
        for m in registry.collect()
        for s in m.samples
        if s.name == "livebridge_tool_orphans_total"
    )
    if total != orphans:
        yield f"{orphans} calls orphaned, livebridge_tool_orphans_total says {total:g}"


def _handlers_ran_once_per_request(run: Run) -> Iterator[str]:
    world = run.world
    for tag, runs in sorted(world.runs.items()):
        if runs > world.requests[tag]:
            yield f"handler #{tag} ran {runs} times for {world.requests[tag]} request(s)"
    if world.peak > run.case.max_parallel:
        yield f"{world.peak} handler bodies ran at once, max_parallel={run.case.max_parallel}"


def _new_request_is_not_served_an_old_answer(run: Run) -> Iterator[str]:
    repeat = run.world.issued.repeat_id
    for event in of_type(run.events, ToolCallSettled):
        if event.call_id == repeat and event.outcome == "duplicate":
            yield f"the repeated request {repeat} was answered from the first one, not run"


def _timing(run: Run) -> Iterator[str]:
    limit = GRACE + LEAVE_SLACK
    if run.leave_seconds > limit:
        yield f"leaving the session took {run.leave_seconds:.2f} s (limit {limit:g} s)"
    slowest = max(TIMEOUTS[c.tool] for c in run.case.calls) + TURNAROUND_SLACK
    for event in of_type(run.events, ToolCallSettled):
        if event.turnaround is not None and event.turnaround > slowest:
            yield (
                f"{event.call_id} ({event.name}, {event.ending}) answered after "
                f"{event.turnaround:.2f} s (limit {slowest:g} s)"
            )


def _emulator_saw_no_breach(run: Run) -> Iterator[str]:
    allowed = set().union(*(CAUSED_BY.get(f, frozenset()) for f in run.case.faults))
    # Leaving mid-batch, the app's close can cross a call the server sends meanwhile: the session
    # answers every call that reaches it before its close frame, and orphans the rest.
    crossed = {
        event.call_id
        for event in of_type(run.events, ToolCallSettled)
        if run.case.leave_mid_batch
        and event.ending == "orphaned"
        and "closed by the app" in (event.reason or "")
    }
    for violation in run.violations:
        if violation.kind in allowed:
            continue
        crossed_close = any(f"call {i} " in violation.message for i in crossed)
        if violation.kind == "unanswered" and crossed_close:
            continue
        if run.case.leave_mid_batch and "crossed the client's close" in violation.message:
            continue  # the server asked while the app was closing: nobody could answer it
        malformed = run.world.issued.malformed_id
        if run.case.malformed == "id_not_string" and f"id {malformed}" in violation.message:
            continue  # the call whose id is a number: answering it as a string is fair
        where = f"{violation.kind} ({violation.severity}) on {violation.session}"
        yield f"emulator: {where}: {violation.message}"
    for error in run.scenario_errors:
        yield f"the scenario failed: {error}"


def _message(entry: TranscriptEntry) -> dict[str, Any]:
    """The entry's message; a raw frame the scenario sent is parsed back."""
    raw = entry.message.get("raw")
    if raw is None:
        return entry.message
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _asked_without_id(message: dict[str, Any]) -> Iterator[str]:
    for call in message.get("toolCall", {}).get("functionCalls", []):
        if isinstance(call, dict) and call.get("id") is None:
            yield str(call.get("name"))


def _asked_ids(message: dict[str, Any]) -> Iterator[str]:
    calls = list(message.get("toolCall", {}).get("functionCalls", []))
    parts = message.get("serverContent", {}).get("modelTurn", {}).get("parts", [])
    calls += [part["functionCall"] for part in parts if "functionCall" in part]
    for call in calls:
        if isinstance(call, dict) and call.get("id") is not None:
            yield str(call["id"])


# -- the tests ---------------------------------------------------------------------------------


def judge(description: str, broken: list[str], notes: list[str]) -> None:
    """Fail with the case, every broken invariant and the world's notes, if any broke."""
    lines = "\n".join(f"  - {b}" for b in broken)
    notes_text = "\n".join(f"  note: {n}" for n in notes)
    assert not broken, f"{description}\n{lines}\n{notes_text}"


async def check_seed(seed: int) -> None:
    case = draw_case(seed)
    print(case.describe())
    run = await run_case(case)
    judge(case.describe(), broken_invariants(run), run.world.notes)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("seed", SEEDS, ids=[f"seed_{s}" for s in SEEDS])
async def test_contract_under_faults(seed: int) -> None:
    await check_seed(seed)


@pytest.mark.timeout(90)
async def test_contract_faults_smoke() -> None:
    for seed in SMOKE_SEEDS:
        await check_seed(seed)


def test_the_budget_draws_every_fault_and_a_seed_always_the_same_case() -> None:
    budget = range(*(int(n) for n in CI_SEEDS.split(":")))
    assert [draw_case(s) for s in budget] == [draw_case(s) for s in budget]
    drawn = set().union(*(draw_case(s).faults for s in budget))
    every = {
        *SERVER_FAULTS,
        *(f"handler:{mode}" for modes in MODES.values() for mode in modes),
        *(f"malformed:{kind}" for kind in MALFORMED),
        "twice",
        "leave_mid_batch",
        "no_handle",
        *(f"model:{model}" for model in MODELS),
        "vertex",
    }
    assert every - drawn == set()
