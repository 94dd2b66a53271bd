"""The exactly-once contract under randomized faults, over OpenAI Realtime.

The same seeded handlers as ``tests/test_contract_faults.py`` (``tests/support/fault_world.py``:
hangs, raises, swallowed cancellations, huge and unserializable results, blocked threads, streams),
a real ``LiveSession`` through the official ``openai`` SDK against the emulator over TLS, and the
server faults that exist on this vendor: closes (1000, 1011, a cut without a close frame), a
response cancelled before it is done, a barge-in while a call runs, a server that starts a response
itself after the outputs (so that the client's ``response.create`` meets it) or just before they are
in (so that it cannot answer them), a ``response.done`` repeated (cancelled, then completed) while
the calls run, one without a response id, a sibling call whose arguments are not valid Unicode, and
responses that never finish, carrying more arguments than the client may hold. Gemini-only faults
(goAway, stale handles, re-issues, ``modelTurn`` twins) have no counterpart here. Besides the shared
invariants: one fate per call whatever the server repeats or omits, the unreadable call fails alone,
and the arguments held never pass their bound. Reproduce one case with ``pytest
tests/test_contract_faults_openai.py -k "seed_5]"``.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from livebridge import CallPolicy, LiveSession, SessionOptions, ToolRegistry
from livebridge.emulator import Conversation, Emulator
from livebridge.protocol.actions import Output, ProtocolOptions
from livebridge.protocol.events import (
    Resumed,
    SessionEvent,
    ToolCallSettled,
    ToolCallStarted,
    TurnComplete,
)
from livebridge.vendors.openai import wire as openai_wire
from livebridge.vendors.openai.calls import MAX_HELD_ARGUMENT_CHARS
from livebridge.vendors.openai.connector import OpenAIConnector
from livebridge.vendors.openai.protocol import OpenAIRealtimeProtocol
from tests.support.fault_world import CLOSE_REASONS, END, MODES, CallPlan, Case, World
from tests.support.gemini_sessions import of_type
from tests.test_contract_faults import (
    GRACE,
    Run,
    _every_call_admitted,
    _handlers_ran_once_per_request,
    _session_ended,
    _timing,
    _unserializable_results_are_errors,
    drive,
    gauges_at_zero,
    judge,
    seed_range,
    set_up,
)

CI_SEEDS = "0:36"
SEEDS = seed_range(CI_SEEDS)

SERVER_FAULTS = (
    "none",
    "close_1000",
    "close_1006",
    "close_1011",
    "cancel_before",
    "interrupted",
    "active_response",
    "racing_response",
    "done_twice",
    "done_without_id",
    "bad_arguments",
    "never_finishes",
)
#: Faults that act on a call still running: a ``hold`` call goes last in the batch.
_HOLDS = frozenset({"close_1000", "close_1006", "close_1011", "interrupted"})
_HANDLERS = [(tool, mode) for tool, modes in MODES.items() if tool != "hold" for mode in modes]
#: Violations a server fault, not the client, can cause.
CAUSED_BY = {
    "close_1000": {"unanswered_call", "missing_response_create"},
    "close_1006": {"unanswered_call", "missing_response_create"},
    "close_1011": {"unanswered_call", "missing_response_create"},
}
SPEECH = {"type": "input_audio_buffer.speech_started", "audio_start_ms": 0, "item_id": "u1"}
#: The unreadable sibling of ``bad_arguments``: a lone UTF-16 surrogate in its arguments.
UNREADABLE = '{"mode": "ok", "tag": "\ud800"}'
#: ``never_finishes``: responses left open, each one call with this many characters of
#: arguments; together more than the client may hold for responses that are not done.
STUCK_RESPONSES = 6
STUCK_ARGUMENT_CHARS = 1_000_000
STUCK_PREFIX = "call_stuck_"


class WatchedProtocol(OpenAIRealtimeProtocol):
    """The session's protocol, noting the most arguments it ever held."""

    peak_held = 0

    def receive(self, message: openai_wire.ServerEvent, now: float) -> list[Output]:
        out = super().receive(message, now)
        self.peak_held = max(self.peak_held, self.calls.held_chars)
        return out


class WatchedConnector(OpenAIConnector):
    """``OpenAIConnector`` whose protocol is a ``WatchedProtocol`` the test can read."""

    watched: WatchedProtocol | None = None

    def protocol(
        self, tools: ToolRegistry, options: ProtocolOptions, *, observed: bool
    ) -> WatchedProtocol:
        self.watched = WatchedProtocol(tools, options, observed=observed)
        return self.watched


def draw_case(seed: int) -> Case:
    """The OpenAI case of ``seed``: the same seed always gives the same case."""
    rng = random.Random(f"openai-{seed}")
    server = rng.choices(SERVER_FAULTS, weights=[4 if f == "none" else 2 for f in SERVER_FAULTS])[0]
    count = rng.randint(1, 4)
    calls = [CallPlan(*rng.choice(_HANDLERS), tag) for tag in range(1, count + 1)]
    if server in _HOLDS:
        calls[-1] = CallPlan("hold", "gate", count)
    return Case(
        seed=seed,
        transport=rng.choices(("wire", "sdk"), weights=(3, 1))[0],
        handle_first=True,
        calls=tuple(calls),
        malformed=None,
        twice=False,
        server=server,
        leave_mid_batch=rng.random() < 0.2,
        max_parallel=rng.choice((1, 2, 4)),
        max_result_bytes=rng.choice((65_536, 262_144)),
    )


async def play(world: World, conv: Conversation, connections: list[Conversation]) -> None:
    """The model's side of one connection; a later connection is a new, empty conversation."""
    connections.append(conv)
    if len(connections) > 1:
        await conv.expect_turn()
        await conv.say(END)
        await conv.turn_complete()
        await asyncio.Event().wait()
    case = world.case
    target = case.calls[-1]
    await conv.expect_turn()
    specs: list[tuple[str, dict[str, Any] | str]] = [(c.tool, c.args) for c in case.calls]
    middle = len(specs) // 2
    if case.server == "bad_arguments":
        specs.insert(middle, ("act", UNREADABLE))
    issued = await conv.realtime.issue_calls("model", specs)
    if case.server == "bad_arguments":
        world.issued.malformed_id = issued.pop(middle)
    ids = dict(zip((c.tag for c in case.calls), issued, strict=True))
    world.issued.ids.update(ids)
    world.note(f"response with calls {ids}")
    for call in case.calls:
        if call is not target or case.server not in _HOLDS:
            world.gate(call.tag).set()
    fault = case.server
    if fault == "cancel_before":
        await conv.cancel(issued)  # the response ends cancelled: none of its calls may run
        await conv.expect_turn()
    elif fault in ("none", "active_response", "bad_arguments"):
        await world._wait_answers(conv, issued, "the batch")
    elif fault == "racing_response":
        conv.realtime.respond_before_next_output()
        await conv.turn_complete()  # the calls run; their first output meets user speech
        await conv.expect_turn()  # the server's own response, begun before the outputs
        await conv.say("one moment")
        await world._wait_answers(conv, issued, "the batch")
        await conv.turn_complete()  # then the client owes the continuation
    elif fault == "done_twice":
        await conv.turn_complete()  # completed: the calls run
        done = last_done(conv)
        cancelled = {**done, "status": "cancelled"}
        cancelled["status_details"] = {"type": "cancelled", "reason": "turn_detected"}
        await conv.send({"type": "response.done", "response": cancelled})
        await conv.send({"type": "response.done", "response": done})
        await world._wait_answers(conv, issued, "the batch")
    elif fault == "done_without_id":
        await conv.realtime.end_response("completed", without_id=True)
        await world._wait_answers(conv, issued, "the batch")
    elif fault == "never_finishes":
        await world._wait_answers(conv, issued, "the batch")
        await conv.say("noted")
        await conv.turn_complete()
        await leave_responses_open(world, conv)
        await conv.close(1011, CLOSE_REASONS[1011])  # the new connection says END
        return
    else:
        await conv.turn_complete()  # the response ends completed: its calls run
        await world._until_entered(target.tag)
        if fault == "close_1006":
            conv.realtime.abort()
            return
        if fault.startswith("close_"):
            code = int(fault.removeprefix("close_"))
            await conv.close(code, CLOSE_REASONS[code])
            return
        await conv.send(SPEECH)  # interrupted: the user talks while the call runs
        world.gate(target.tag).set()
        await world._wait_answers(conv, issued, "the batch")
    await conv.say(END)
    await conv.turn_complete()
    await asyncio.Event().wait()


def last_done(conv: Conversation) -> dict[str, Any]:
    """The ``response`` of the last ``response.done`` this connection sent, as sent."""
    return next(
        entry.message["response"]
        for entry in reversed(conv.realtime.shared.transcript)
        if entry.session == conv.realtime.id and entry.message.get("type") == "response.done"
    )


async def leave_responses_open(world: World, conv: Conversation) -> None:
    """Responses with one call each whose ``response.done`` never comes."""
    arguments = json.dumps({"mode": "ok", "tag": 0, "pad": "x" * STUCK_ARGUMENT_CHARS})
    for n in range(STUCK_RESPONSES):
        response_id, call_id = f"resp_stuck_{n}", f"{STUCK_PREFIX}{n}"
        where = {"response_id": response_id, "output_index": 0}
        item = {"type": "function_call", "id": f"item_stuck_{n}", "call_id": call_id}
        await conv.send({"type": "response.created", "response": {"id": response_id}})
        await conv.send({"type": "response.output_item.added", **where, "item": item})
        await conv.send(
            {
                "type": "response.function_call_arguments.done",
                **where,
                "call_id": call_id,
                "name": "act",
                "arguments": arguments,
            }
        )
    world.note(f"left {STUCK_RESPONSES} responses open, {STUCK_ARGUMENT_CHARS:,} chars each")


async def run_case(case: Case) -> tuple[Run, WatchedProtocol]:
    world, tools, registry, metrics, policy = set_up(case)
    options = SessionOptions(transport=case.transport, shutdown_grace=GRACE, reconnect_attempts=2)
    connections: list[Conversation] = []

    async def scenario(conv: Conversation) -> None:
        await play(world, conv, connections)

    auto = case.server == "active_response"
    async with Emulator(scenario, protocol="openai", auto_response=auto) as emu:
        world.emulator = emu
        connector = WatchedConnector(
            emu.openai_client(),
            model="gpt-realtime",
            tools=tools,
            config={"output_modalities": ["text"]},
            transport=case.transport,
        )
        session = LiveSession.connect(
            tools=tools, policy=policy, observers=[metrics], options=options, connector=connector
        )
        run = await drive(case, world, emu, session, registry, again=_asks_again)
    assert connector.watched is not None
    return run, connector.watched


def _asks_again(event: SessionEvent) -> bool:
    """The app speaks again after a cancelled turn or on a new, empty conversation."""
    cancelled = isinstance(event, TurnComplete) and event.reason == "cancelled"
    return cancelled or isinstance(event, Resumed)


# -- the invariants (the shared ones come from tests/test_contract_faults.py) ----------------


def broken_invariants(run: Run, protocol: WatchedProtocol) -> list[str]:
    return [
        *_session_ended(run),
        *_unreadable_call_fails_alone(run),
        *_stuck_calls_end_once(run),
        *_held_arguments_bounded(protocol),
        *_outputs_on_the_wire(run),
        *_every_call_admitted(run),
        *_one_fate_per_call(run),
        *_unserializable_results_are_errors(run),
        *_metrics_agree(run),
        *_handlers_ran_once_per_request(run),
        *_cancelled_responses_never_run(run),
        *_timing(run),
        *_emulator_saw_no_breach(run),
    ]


def _outputs_on_the_wire(run: Run) -> Iterator[str]:
    """One ``function_call_output`` per call at most, only for calls that connection issued."""
    outputs: Counter[tuple[str, str]] = Counter()
    for entry in run.transcript:
        message = entry.message
        item = message.get("item") or {}
        if entry.direction != "client" or item.get("type") != "function_call_output":
            continue
        call_id = str(item.get("call_id"))
        outputs[(entry.session, call_id)] += 1
        if outputs[(entry.session, call_id)] > 1:
            yield f"{call_id} answered twice on {entry.session}"
        if call_id not in run.known.get(entry.session, set()):
            yield f"{call_id} answered on {entry.session}, which never asked for it"
        if len(json.dumps(message)) > CallPolicy().max_frame_bytes:
            yield f"the output frame of {call_id} is over max_frame_bytes"


def _one_fate_per_call(run: Run) -> Iterator[str]:
    started = Counter(e.call_id for e in of_type(run.events, ToolCallStarted))
    settled = Counter(e.call_id for e in of_type(run.events, ToolCallSettled))
    for call_id in sorted(started.keys() | settled.keys()):
        if settled[call_id] != 1 or started[call_id] > 1:
            yield f"{call_id}: started {started[call_id]} time(s), {settled[call_id]} fate(s)"


def _cancelled_responses_never_run(run: Run) -> Iterator[str]:
    started = {e.call_id for e in of_type(run.events, ToolCallStarted)}
    for event in of_type(run.events, ToolCallSettled):
        if "its response ended" in (event.reason or "") and event.call_id in started:
            yield f"{event.call_id} of a cancelled response was started"
    if run.case.server == "cancel_before" and any(run.world.runs.values()):
        yield f"handlers ran for a cancelled response: {dict(run.world.runs)}"


def _metrics_agree(run: Run) -> Iterator[str]:
    registry = run.registry
    yield from gauges_at_zero(run)
    counted = sum(
        int(s.value)
        for m in registry.collect()
        for s in m.samples
        if s.name == "livebridge_tool_calls_total"
    )
    started = {e.call_id for e in of_type(run.events, ToolCallStarted)}
    withdrawn = [
        e
        for e in of_type(run.events, ToolCallSettled)
        if e.call_id not in started and e.ending == "cancelled"
    ]
    if counted != len(started) + len(withdrawn):
        yield (
            f"livebridge_tool_calls_total is {counted}; {len(started)} calls ran and "
            f"{len(withdrawn)} were withdrawn"
        )


def _emulator_saw_no_breach(run: Run) -> Iterator[str]:
    allowed = CAUSED_BY.get(run.case.server, set())
    left_early = run.case.leave_mid_batch
    for violation in run.violations:
        if violation.severity != "error" or violation.kind in allowed:
            continue
        if left_early and violation.kind in ("unanswered_call", "missing_response_create"):
            continue  # the app left mid-batch: calls still running at its close are orphaned
        yield f"emulator: {violation.kind} on {violation.session}: {violation.message}"
    for error in run.scenario_errors:
        yield f"the scenario failed: {error}"


def _unreadable_call_fails_alone(run: Run) -> Iterator[str]:
    bad = run.world.issued.malformed_id
    if bad is None:
        return
    fates = [e for e in of_type(run.events, ToolCallSettled) if e.call_id == bad]
    if run.case.leave_mid_batch and all(e.ending == "orphaned" for e in fates):
        return  # the app left before its batch was answered
    if [e.ending for e in fates] != ["rejected"]:
        yield f"the call with unreadable arguments {bad} ended {[e.ending for e in fates]}"
    outputs = [
        json.loads(entry.message["item"]["output"])
        for entry in run.transcript
        if entry.direction == "client" and (entry.message.get("item") or {}).get("call_id") == bad
    ]
    if fates and [o.get("error", {}).get("type") for o in outputs] != ["invalid_arguments"]:
        yield f"the call with unreadable arguments {bad} was answered {outputs}"


def _stuck_calls_end_once(run: Run) -> Iterator[str]:
    """Calls of responses that never finish: never run, one fate each (orphaned)."""
    started = {e.call_id for e in of_type(run.events, ToolCallStarted)}
    fates = Counter(e.call_id for e in of_type(run.events, ToolCallSettled))
    stuck = {
        str(entry.message.get("call_id"))
        for entry in run.transcript
        if entry.direction == "server"
        and entry.message.get("type") == "response.function_call_arguments.done"
        and str(entry.message.get("call_id")).startswith(STUCK_PREFIX)
    }
    for call_id in sorted(stuck):
        if call_id in started:
            yield f"{call_id}, of a response that never finished, was started"
        if fates[call_id] != 1:
            yield f"{call_id}, of a response that never finished, has {fates[call_id]} fate(s)"


def _held_arguments_bounded(protocol: WatchedProtocol) -> Iterator[str]:
    if protocol.peak_held > MAX_HELD_ARGUMENT_CHARS:
        yield f"{protocol.peak_held:,} characters of arguments held, over the bound"


# -- the tests ---------------------------------------------------------------------------------


async def check_seed(seed: int) -> None:
    case = draw_case(seed)
    print(case.describe())
    run, protocol = await run_case(case)
    judge(case.describe(), broken_invariants(run, protocol), run.world.notes)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("seed", SEEDS, ids=[f"seed_{s}" for s in SEEDS])
async def test_openai_contract_under_faults(seed: int) -> None:
    await check_seed(seed)


def test_the_budget_draws_every_openai_fault_and_a_seed_always_the_same_case() -> None:
    budget = range(*(int(n) for n in CI_SEEDS.split(":")))
    assert [draw_case(s) for s in budget] == [draw_case(s) for s in budget]
    drawn = {draw_case(s).server for s in budget}
    assert drawn == set(SERVER_FAULTS)
    assert any(draw_case(s).leave_mid_batch for s in budget)
    assert {draw_case(s).transport for s in budget} == {"wire", "sdk"}
