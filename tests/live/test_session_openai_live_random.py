"""At random: overlapping delegations, parallel calls, failed and incomplete responses, slow
handlers and dropped sockets, on GPT-Live through the unmodified ``openai`` SDK. Whatever
happens, every call gets exactly one fate, no output goes to a call without one, and exactly
one ``response.create`` goes out per opening of the session-wide gate (the emulator names any
early, duplicate or refused continuation as a verdict)."""

from __future__ import annotations

import asyncio
import functools
import random
import threading

import anyio
import pytest

import livebridge
from livebridge.emulator import Emulator, LiveOptions, LiveServerSession
from livebridge.errors import SessionEndedError
from livebridge.protocol.events import ErrorReported, SessionEvent, ToolCallSettled
from tests.support.gpt_live_sessions import MODEL, open_live, outputs, sent
from tests.support.timing import seconds

SEEDS = range(40)
WEDGED = 10.0  # seconds without the continuation owed: the session is wedged


def tools(rng: random.Random) -> livebridge.ToolRegistry:
    registry = livebridge.ToolRegistry()
    delays = [rng.choice((0.0, 0.0, 0.01, 0.05, 0.2)) for _ in range(64)]

    @registry.tool
    async def work(n: int) -> dict[str, int]:
        """Some work that takes a while."""
        await asyncio.sleep(delays[n % len(delays)])  # variety, not synchronisation
        return {"n": n}

    @registry.tool
    async def fail(n: int) -> str:
        """Work that fails."""
        raise livebridge.ToolError(f"no {n}")

    return registry


@pytest.mark.parametrize("seed", SEEDS)
async def test_random_delegations_keep_one_fate_per_call_and_one_create_per_gate(
    seed: int,
) -> None:
    rng = random.Random(seed)
    server_rng = random.Random(seed + 1000)  # the emulator's thread draws from its own
    plan = [
        (
            [
                (rng.choice(("work", "work", "fail")), {"n": rng.randrange(64)})
                for _ in range(rng.randrange(0, 4))
            ],
            rng.choice(("completed", "completed", "failed", "incomplete", None)),
            rng.random() < 0.4,  # under the previous delegation
        )
        for _ in range(rng.randrange(1, 5))
    ]
    drop = rng.random() < 0.3
    issued: list[str] = []
    done = threading.Event()  # set on the emulator's thread

    async def scenario(live: LiveServerSession) -> None:
        await live.wait_until(lambda: live.started)
        delegation = None
        running: list[str] = []
        for calls, end, same in plan:
            delegation, response, ids = await live.delegate(
                calls, delegation=delegation if same else None, end=end
            )
            issued.extend(ids)
            if end is None:
                running.append(response)
            if server_rng.random() < 0.5 and ids:  # let some outputs arrive meanwhile
                await live.wait_until(functools.partial(_all_ended, live, ids))
        for response in running:
            await live.end(response, server_rng.choice(("completed", "failed")))
        if drop:
            live.abort()
            return  # the test learns of it from the session
        # The gate opens once: a continuation follows the last output (none if no output).
        await live.wait_until(
            lambda: not live.backend.open and (not live.backend.fresh), timeout=WEDGED
        )
        done.set()
        await live.changed()  # wakes the test's wait_for

    events: list[SessionEvent] = []
    arrived = asyncio.Event()

    async def read(session: livebridge.LiveSession) -> None:
        async for event in session.events():
            events.append(event)
            arrived.set()

    emulator = Emulator(scenario, model=MODEL)
    assert emulator.live is not None
    emulator.live.options = LiveOptions(proof=True)  # (the default) crossed refusals: races
    try:
        registry = tools(rng)
        async with (
            emulator as emu,
            open_live(emu, registry) as session,
            anyio.create_task_group() as group,
        ):
            group.start_soon(read, session)
            await emu.wait_for(done.is_set, timeout=WEDGED + 10)
            with anyio.fail_after(seconds(30)):
                while _settled(events) < len(issued) or _reported(events) < _races(emu):
                    await arrived.wait()
                    arrived.clear()
                # An output that crossed a failure may still be on its way: once the server has
                # read every output the client sent, each race it counted must surface too.
                await emu.wait_for(lambda: _sent_outputs(events) <= set(outputs(emu)), seconds(30))
                # So may a continuation that crossed new calls: once the server has read every
                # response.create the client sent, every refusal it counted is on its way.
                gate = session._protocol.gate  # type: ignore[attr-defined]
                await emu.wait_for(lambda: _creates_read(emu) >= gate.creates, seconds(30))
                while _reported(events) < _races(emu):
                    await arrived.wait()
                    arrived.clear()
            group.cancel_scope.cancel()
    except SessionEndedError:
        assert drop
    assert emulator.live is not None
    live = emulator.live.sessions[0]
    assert live.verdicts == []  # races that crossed on the wire are counted, not faults
    assert _reported(events) == live.backend.races or drop  # each surfaced, none silent
    fates = [e.call_id for e in events if isinstance(e, ToolCallSettled)]
    assert len(fates) == len(set(fates))
    if not drop:
        assert sorted(fates) == sorted(issued)
        assert not live.backend.fresh  # every set of outputs got its continuation
    answered = outputs(emu)
    assert set(answered) <= set(issued)
    assert len(set(answered) & live.backend.dropped) <= live.backend.races
    assert len(sent(emu, "response.create")) == live.backend.creates + live.backend.refusals


def _all_ended(live: LiveServerSession, call_ids: list[str]) -> bool:
    backend = live.backend
    return all(c in backend.answered or c in backend.dropped for c in call_ids)


def _reported(events: list[SessionEvent]) -> int:
    return sum(isinstance(e, ErrorReported) for e in events)


def _races(emu: Emulator) -> int:
    assert emu.live is not None
    return emu.live.sessions[0].backend.races


def _sent_outputs(events: list[SessionEvent]) -> set[str]:
    """The calls the client answered with an output (a cancelled or orphaned call has none)."""
    return {
        e.call_id
        for e in events
        if isinstance(e, ToolCallSettled) and e.ending not in ("cancelled", "orphaned")
    }


def _creates_read(emu: Emulator) -> int:
    """The ``response.create`` events the server has read (accepted or refused)."""
    return len(sent(emu, "response.create"))


def _settled(events: list[SessionEvent]) -> int:
    return sum(isinstance(e, ToolCallSettled) for e in events)
