"""LiveSession against the emulator: re-issues, duplicate delivery, microphone audio during a
blocking call, keepalive."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import anyio
import pytest

import livebridge
from livebridge import CallContext, LiveSession, SessionOptions
from livebridge.emulator import Conversation, Emulator
from livebridge.emulator.gemini import checker
from livebridge.protocol.events import (
    TextOut,
    ToolCallSettled,
    ToolCallStarted,
)
from tests.support.gemini_sessions import (
    MODEL,
    TEXT_CONFIG,
    client_messages,
    collect_until,
    errors,
    of_type,
)

# -- re-issues, duplicate delivery, microphone audio during a blocking call ----------------------


async def test_reissued_call_runs_once_and_every_id_is_answered() -> None:
    runs: list[str] = []
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def charge_card(amount: int, ctx: CallContext) -> dict[str, Any]:
        """Charge the card once (not idempotent)."""
        runs.append(ctx.call_id)
        await anyio.sleep(0.6)
        return {"charged": amount}

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids = await conv.tool_call([("charge_card", {"amount": 5})])
        await conv.wait_answers(ids)
        await conv.say("charged")
        await conv.turn_complete()

    async with (
        Emulator(scenario, reissue_after=0.2) as emu,
        LiveSession.connect(emu.client(), model=MODEL, tools=tools, config=TEXT_CONFIG) as session,
    ):
        await session.send_text("pay")
        events = await collect_until(
            session, lambda e: isinstance(e, TextOut) and e.text == "charged"
        )

    issued = [
        c["id"]
        for e in emu.transcript
        if "toolCall" in e.message
        for c in e.message["toolCall"]["functionCalls"]
    ]
    answered = [
        r["id"] for m in client_messages(emu, "toolResponse") for r in m["functionResponses"]
    ]
    assert len(issued) >= 2
    assert len(runs) == 1  # re-issues are answered from the first run
    assert sorted(answered) == sorted(issued)  # every id answered, none twice
    outcomes = {e.ending for e in of_type(events, ToolCallSettled)}
    assert "ok" in outcomes
    assert errors(emu) == []


async def test_the_same_call_asked_after_its_answer_was_read_runs_again() -> None:
    # The server read the answer (and the ping behind it) before the user's next turn, so the
    # same call asked after that turn is a new request: run again, not answered from the first.
    runs: list[str] = []
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def charge_card(amount: int, ctx: CallContext) -> dict[str, Any]:
        """Charge the card (not idempotent)."""
        runs.append(ctx.call_id)
        return {"charged": amount}

    async def scenario(conv: Conversation) -> None:
        for text in ("charged", "charged again"):
            await conv.expect_turn()  # the client sent it after the ping behind the last answer
            ids = await conv.tool_call([("charge_card", {"amount": 5})])
            await conv.wait_answers(ids)
            await conv.say(text)
            await conv.turn_complete()

    async with (
        Emulator(scenario) as emu,
        LiveSession.connect(emu.client(), model=MODEL, tools=tools, config=TEXT_CONFIG) as session,
    ):
        await session.send_text("pay")
        await collect_until(session, lambda e: isinstance(e, TextOut) and e.text == "charged")
        await session.send_text("pay again")
        await collect_until(session, lambda e: isinstance(e, TextOut) and e.text == "charged again")

    assert len(runs) == 2
    assert errors(emu) == []


async def test_call_delivered_in_model_turn_and_tool_call_runs_once() -> None:
    runs: list[str] = []
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def turn_on(light: str) -> str:
        """Turn a light on."""
        runs.append(light)
        return "on"

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        call = {"id": "function-call-77", "name": "turn_on", "args": {"light": "hall"}}
        conv.session.checker.issue([("function-call-77", "turn_on", {"light": "hall"}, True)])
        await conv.send({"serverContent": {"modelTurn": {"parts": [{"functionCall": call}]}}})
        await conv.send({"toolCall": {"functionCalls": [call]}})
        await conv.wait_answers(["function-call-77"])
        await conv.say("done")
        await conv.turn_complete()

    async with (
        Emulator(scenario) as emu,
        LiveSession.connect(emu.client(), model=MODEL, tools=tools, config=TEXT_CONFIG) as session,
    ):
        await session.send_text("lights")
        await collect_until(session, lambda e: isinstance(e, TextOut) and e.text == "done")

    assert runs == ["hall"]
    answered = [
        r["id"] for m in client_messages(emu, "toolResponse") for r in m["functionResponses"]
    ]
    assert answered == ["function-call-77"]
    assert errors(emu) == []


@pytest.mark.parametrize("policy", ["hold", "send", "drop"])
async def test_microphone_audio_while_a_blocking_call_is_pending(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checker, "AUDIO_IN_FLIGHT", 0.0)  # judge every frame, however fast
    release = threading.Event()
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def slow_lookup(key: str) -> str:
        """A lookup that waits to be released."""
        await anyio.to_thread.run_sync(release.wait, 10)
        return "found"

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids = await conv.tool_call([("slow_lookup", {"key": "k"})])
        await conv.wait_answers(ids)
        await conv.say("answered")
        await conv.turn_complete()
        await asyncio.sleep(60)

    chunk = bytes(1280)  # 40 ms of near-silence: background noise, not a barge-in
    async with (
        Emulator(scenario) as emu,
        LiveSession.connect(
            emu.client(),
            model=MODEL,
            tools=tools,
            config=TEXT_CONFIG,
            options=SessionOptions(audio_during_blocking=policy),  # type: ignore[arg-type]
        ) as session,
    ):
        await session.send_text("look it up")
        await collect_until(session, lambda e: isinstance(e, ToolCallStarted))
        # Audio is judged from the moment the client is seen to have read the call (its pong).
        await emu.wait_for(lambda: all(r.read_at for r in emu.sessions[0].checker.calls.values()))
        for _ in range(5):
            await session.send_audio(chunk)
        await session.send_text("marker")  # the writer has handled the audio before this
        await emu.wait_for(
            lambda: any(m.get("text") == "marker" for m in client_messages(emu, "realtimeInput"))
        )
        audio_before = [m for m in client_messages(emu, "realtimeInput") if "audio" in m]
        release.set()
        await collect_until(session, lambda e: isinstance(e, TextOut) and e.text == "answered")
        await emu.wait_for(lambda: len(client_messages(emu, "toolResponse")) == 1)
        if policy == "hold":
            await emu.wait_for(
                lambda: sum("audio" in m for m in client_messages(emu, "realtimeInput")) == 5
            )
        audio_after = [m for m in client_messages(emu, "realtimeInput") if "audio" in m]
        dropped = session.audio_dropped

    warnings = [v.kind for v in emu.violations if v.kind == "audio_during_blocking"]
    if policy == "hold":
        assert audio_before == [] and len(audio_after) == 5 and dropped == 0
        assert warnings == []
    elif policy == "send":
        assert len(audio_before) == 5 and warnings == ["audio_during_blocking"]
    else:
        assert audio_before == audio_after == [] and dropped == 5
    assert errors(emu) == []


async def test_keepalive_tolerates_slow_pongs() -> None:
    async def scenario(conv: Conversation) -> None:
        await asyncio.sleep(60)

    async with (
        Emulator(scenario) as emu,
        LiveSession.connect(
            emu.client(), model=MODEL, tools=livebridge.ToolRegistry(), config=TEXT_CONFIG
        ) as session,
    ):
        transport = session._transport
        ws = getattr(transport, "_ws", None)
        assert ws is not None
        assert ws.ping_timeout == 60.0 and ws.ping_interval == 20.0
