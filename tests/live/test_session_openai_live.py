"""``LiveSession`` on GPT-Live: the unmodified ``openai`` SDK's ``client.live.connect()``
against the emulator over TLS, Responses delegation under the exactly-once contract."""

from __future__ import annotations

import asyncio

import pytest

import livebridge
from livebridge.calls.observers import CallOrphaned, Recorder
from livebridge.emulator import Emulator, LiveOptions, LiveServerSession, Signal
from livebridge.errors import SessionEndedError
from livebridge.protocol.events import (
    Closed,
    ErrorReported,
    TextOut,
    ToolCallSettled,
    ToolCallStarted,
    TurnComplete,
)
from tests.support.gemini_sessions import collect_until, of_type
from tests.support.gpt_live_sessions import MODEL, open_live, outputs, sent, server_errors
from tests.support.timing import seconds


def registry(gate: Signal | None = None) -> livebridge.ToolRegistry:
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def lookup_plan(user: str) -> dict[str, str]:
        """The user's plan (slow)."""
        if gate is not None:
            await asyncio.wait_for(gate.wait(), seconds(20))
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


async def test_overlapping_delegations_share_one_gate() -> None:
    """T1: a fast call under one delegation settles while a slow one under another runs; the
    continuation waits for both (the service's gate is session-wide)."""
    gate = Signal()  # set on the emulator's thread, awaited by a handler on this loop

    async def scenario(live: LiveServerSession) -> None:
        await live.wait_until(lambda: live.started)
        await live.delegate([("lookup_plan", {"user": "ada"})])
        await live.delegate([("lookup_preferences", {"user": "ada"})])
        await live.wait_until(lambda: len(live.backend.answered) == 1)  # the fast one
        gate.set()

    async with Emulator(scenario, model=MODEL) as emu, open_live(emu, registry(gate)) as session:
        events = await collect_until(session, lambda e: isinstance(e, TurnComplete))
    assert emu.live is not None
    live = emu.live.sessions[0]
    assert live.verdicts == []
    assert live.backend.refusals == 0
    assert len(sent(emu, "response.create")) == 1
    assert len(outputs(emu)) == 2
    assert {e.outcome for e in of_type(events, ToolCallSettled)} == {"ok"}


async def test_a_failed_response_cancels_its_calls_and_never_wedges() -> None:
    """T3/T4: the backend fails after issuing a call; the call ends cancelled (its handler
    cancelled, no output sent for it), and the next delegation is answered and continued."""
    gate = asyncio.Event()
    cancelled = asyncio.Event()
    tools = registry()

    @tools.tool
    async def transfer(amount: int) -> str:
        """Move money (slow)."""
        try:
            await asyncio.wait_for(gate.wait(), seconds(20))
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "moved"

    async def scenario(live: LiveServerSession) -> None:
        await live.wait_until(lambda: live.started)
        _, response, _ = await live.delegate([("transfer", {"amount": 5})], end=None)
        await live.end(response, "failed")
        await live.delegate([("lookup_preferences", {"user": "ada"})])

    def continued(event: object) -> bool:
        return isinstance(event, TurnComplete) and event.reason == "completed"

    async with Emulator(scenario, model=MODEL) as emu, open_live(emu, tools) as session:
        events = await collect_until(session, continued)
        gate.set()
    settled = {e.name: e for e in of_type(events, ToolCallSettled)}
    assert settled["transfer"].ending == "cancelled"
    assert "failed" in (settled["transfer"].reason or "")
    assert settled["lookup_preferences"].outcome == "ok"
    assert cancelled.is_set()
    assert list(outputs(emu)) == [settled["lookup_preferences"].call_id]
    assert len(sent(emu, "response.create")) == 1
    assert emu.live is not None
    assert emu.live.sessions[0].verdicts == []


async def test_an_output_is_cut_to_the_sessions_backend_budget() -> None:
    """T6: a 40 KB result would be refused (response_input_buffer_full) and wedge the
    session; livebridge cuts it to what the session's budget has left, flagged truncated."""
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def search(query: str) -> str:
        """A search with a huge result."""
        return "x" * 40_000

    async def scenario(live: LiveServerSession) -> None:
        await live.wait_until(lambda: live.started)
        await live.delegate([("search", {"query": "all"})])

    async with Emulator(scenario, model=MODEL) as emu, open_live(emu, tools) as session:
        events = await collect_until(session, lambda e: isinstance(e, TurnComplete))
    assert emu.live is not None
    live = emu.live.sessions[0]
    assert live.verdicts == []
    [answer] = outputs(emu).values()
    assert answer["truncated"] is True
    assert 20_000 < len(answer["output"]) < 32_768
    assert live.backend.used_bytes <= 32_768
    assert len(sent(emu, "response.create")) == 1
    assert server_errors(emu) == []
    assert of_type(events, ToolCallSettled)[0].outcome == "ok"


async def test_a_budget_refusal_is_reported_and_the_call_answered_again() -> None:
    """A service whose budget is smaller than the profile says refuses an output; the refusal
    surfaces as ``ErrorReported`` naming its code, the call is answered again briefly and the
    continuation still goes out: never a silent stall."""

    async def scenario(live: LiveServerSession) -> None:
        await live.wait_until(lambda: live.started)
        await live.delegate([("lookup_plan", {"user": "ada" * 200})])

    emulator = Emulator(scenario, model=MODEL)
    assert emulator.live is not None
    emulator.live.options = LiveOptions(bytes=600)
    async with emulator as emu, open_live(emu, registry()) as session:
        events = await collect_until(session, lambda e: isinstance(e, TurnComplete))
    reported = of_type(events, ErrorReported)
    codes = [getattr(e.error, "code", None) for e in reported]
    # No acknowledgement tells that an output was refused before the continuation leaves: as
    # a rule the first create is refused too, and goes again once the call is answered again;
    # if the refusal is read before the writer's turn, the one create follows the new answer.
    refused_create = ["function_call_outputs_required"] if len(codes) == 2 else []
    assert codes == ["response_input_buffer_full", *refused_create]
    backend = emulator.live.sessions[0].backend
    assert backend.open == {}
    assert backend.creates == 1
    assert len(sent(emu, "response.create")) == 1 + len(refused_create)


async def test_a_dropped_socket_ends_the_session_with_a_fate_for_every_open_call() -> None:
    """No resumption: the drop ends the session; the running call is orphaned, never answered
    on another socket."""
    gate = Signal()  # never set: the call is still running when the socket drops

    async def scenario(live: LiveServerSession) -> None:
        await live.wait_until(lambda: live.started)
        await live.delegate([("lookup_plan", {"user": "ada"})])
        live.abort()

    recorder = Recorder()
    with pytest.raises(SessionEndedError, match="no resumption"):
        async with (
            Emulator(scenario, model=MODEL) as emu,
            open_live(emu, registry(gate), observers=[recorder]) as session,
        ):
            await collect_until(session, lambda e: isinstance(e, Closed))
    [fate] = recorder.of(CallOrphaned)
    assert fate.name == "lookup_plan"
    assert "no resumption" in fate.reason
    assert emu.live is not None
    assert len(emu.live.sessions) == 1
    assert outputs(emu) == {}


async def test_the_continuation_waits_for_the_response_that_asked() -> None:
    """T5: every output is in before the response that asked for them ends; the continuation
    waits for its ``response.completed`` (it could still emit calls)."""

    async def scenario(live: LiveServerSession) -> None:
        await live.wait_until(lambda: live.started)
        _, response, _ = await live.delegate([("lookup_preferences", {"user": "ada"})], end=None)
        await live.wait_until(lambda: len(live.backend.answered) == 1)
        pong = await live.ws.ping()  # the client read everything up to here
        await pong
        await live.end(response)

    async with Emulator(scenario, model=MODEL) as emu, open_live(emu, registry()) as session:
        await collect_until(session, lambda e: isinstance(e, TurnComplete))
    assert emu.live is not None
    assert emu.live.sessions[0].verdicts == []
    assert len(sent(emu, "response.create")) == 1


async def test_typed_text_goes_to_the_backend_and_is_continued_once() -> None:
    """``send_text`` queues a user message for the backend (``response.item.create``), and the
    gate sends the one ``response.create`` that starts work on it."""

    async def scenario(live: LiveServerSession) -> None:
        await live.wait_until(lambda: live.started)

    async with Emulator(scenario, model=MODEL) as emu, open_live(emu, registry()) as session:
        await session.send_text("What is my plan?")
        events = await collect_until(session, lambda e: isinstance(e, TurnComplete))
    assert [m["item"]["type"] for m in sent(emu, "response.item.create")] == ["message"]
    assert len(sent(emu, "response.create")) == 1
    assert any(isinstance(e, TextOut) for e in events)
    assert emu.live is not None
    assert emu.live.sessions[0].verdicts == []
