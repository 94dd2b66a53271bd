"""``LiveSession`` on GPT-Live: the unmodified ``openai`` SDK's ``client.live.connect()``
against the emulator over TLS, Responses delegation under the exactly-once contract."""

from __future__ import annotations

import asyncio

import livebridge
from livebridge.emulator import Emulator
from livebridge.emulator.openai_live import LiveServerSession
from livebridge.live.events import ToolCallSettled, ToolCallStarted, TurnComplete
from tests.emulator.openai_live_helpers import MODEL, open_live, outputs, sent, server_errors
from tests.session_helpers import collect_until, of_type


def registry(gate: asyncio.Event | None = None) -> livebridge.ToolRegistry:
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def lookup_plan(user: str) -> dict[str, str]:
        """The user's plan (slow)."""
        if gate is not None:
            await asyncio.wait_for(gate.wait(), 20)
        return {"user": user, "plan": "pro"}

    @tools.tool
    async def lookup_preferences(user: str) -> dict[str, str]:
        """The user's preferences (fast)."""
        return {"user": user, "lang": "nb"}

    return tools


async def test_parallel_calls_get_one_output_each_and_one_continuation() -> None:
    async def scenario(live: LiveServerSession) -> None:
        await live.wait_until(lambda: live.started)
        await live.delegate(
            [("lookup_plan", {"user": "ada"}), ("lookup_preferences", {"user": "ada"})]
        )

    async with Emulator(scenario, model=MODEL) as emu, open_live(emu, registry()) as session:
        events = await collect_until(session, lambda e: isinstance(e, TurnComplete))
    started = of_type(events, ToolCallStarted)
    assert sorted(e.name for e in started) == ["lookup_plan", "lookup_preferences"]
    settled = of_type(events, ToolCallSettled)
    assert {e.outcome for e in settled} == {"ok"}
    assert set(outputs(emu)) == {e.call_id for e in started}
    assert len(sent(emu, "response.create")) == 1
    assert server_errors(emu) == []
    assert sent(emu, "session.start")[0]["session"]["delegation"]["responses"]["tools"]
