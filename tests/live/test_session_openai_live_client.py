"""GPT-Live client delegation: ``SessionOptions(delegate=fn)`` answers every
``session.delegation.created`` once, in arrival order, in appends the service takes; a delegate
that fails or outlives its timeout still gets a spoken apology. The unmodified ``openai`` SDK
against the emulator."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import livebridge
from livebridge import CallPolicy, LiveSession, SessionOptions
from livebridge.emulator import Emulator, LiveServerSession
from livebridge.protocol.events import ToolCallSettled
from livebridge.vendors.openai_live.delegation import APOLOGY, MAX_APPEND, Delegation
from tests.support.gemini_sessions import collect_until
from tests.support.gpt_live_sessions import MODEL, sent

CLIENT = {"delegation": {"type": "client"}}


def settled(count: int) -> Any:
    seen: list[str] = []

    def done(event: object) -> bool:
        if isinstance(event, ToolCallSettled):
            seen.append(event.call_id)
        return len(seen) >= count

    return done


async def test_each_delegation_gets_one_reply_in_appends_the_service_takes() -> None:
    asked: list[str] = []

    async def delegate(delegation: Delegation) -> AsyncIterator[str]:
        asked.append(delegation.id)
        for n in range(12):
            yield f"Fact number {n} is that staging is healthy and the last deploy went fine. " * 5

    async def scenario(live: LiveServerSession) -> None:
        await live.wait_until(lambda: live.started)
        await live.delegate_to_client()
        await live.delegate_to_client()

    options = SessionOptions(delegate=delegate)
    async with (
        Emulator(scenario, model=MODEL) as emu,
        LiveSession.connect(
            emu.client(),
            model=MODEL,
            tools=livebridge.ToolRegistry(),
            config=CLIENT,
            options=options,
        ) as session,
    ):
        await collect_until(session, settled(2))
        assert emu.live is not None
        live = emu.live.sessions[0]
        await emu.wait_for(  # every append of both replies has reached the emulator
            lambda: (
                len(live.client_delegations) == 2
                and all(
                    replies and "Fact number 11" in replies[-1]
                    for replies in live.client_delegations.values()
                )
            )
        )
    assert asked == list(live.client_delegations)  # once each, in arrival order
    appends = sent(emu, "session.commentary.append")
    assert all(len(a["content"]) <= MAX_APPEND for a in appends)
    assert len(appends) >= 4
    assert all(a["delegation_id"] in live.client_delegations for a in appends)
    for replies in live.client_delegations.values():
        assert replies and "Fact number 11" in replies[-1]
    assert live.verdicts == []
    assert sent(emu, "response.create") == []


async def test_a_failing_or_slow_delegate_still_apologises() -> None:
    calls = 0

    async def delegate(delegation: Delegation) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("backend down")
        await asyncio.sleep(30)  # outlives CallPolicy.timeout
        return "too late"

    async def scenario(live: LiveServerSession) -> None:
        await live.wait_until(lambda: live.started)
        await live.delegate_to_client()
        await live.delegate_to_client()

    options = SessionOptions(delegate=delegate)
    async with (
        Emulator(scenario, model=MODEL) as emu,
        LiveSession.connect(
            emu.client(),
            model=MODEL,
            tools=livebridge.ToolRegistry(),
            config=CLIENT,
            options=options,
            policy=CallPolicy(timeout=0.5),
        ) as session,
    ):
        events = await collect_until(session, settled(2))
        assert emu.live is not None
        live = emu.live.sessions[0]
        await emu.wait_for(lambda: all(live.client_delegations.values()))
    assert sorted(e.ending for e in events if isinstance(e, ToolCallSettled)) == [
        "error",
        "timeout",
    ]
    assert [r for r in live.client_delegations.values()] == [[APOLOGY], [APOLOGY]]
