"""An ``irreversible=True`` tool starts only once the model's turn that issued it is confirmed.

Real sessions against the emulator over TLS. Gemini issues calls mid-generation: the handler
waits for ``generationComplete``/``turnComplete`` (or ``confirm_window`` seconds of silence),
and an ``interrupted`` turn, a ``toolCallCancellation`` or new user input first means it never
runs. OpenAI Realtime runs calls at a ``completed`` ``response.done``: a response the user cut
off never runs its calls.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import livebridge
from livebridge import CallPolicy, LiveSession
from livebridge.emulator import Conversation, Emulator
from livebridge.protocol.events import SessionEvent, TextOut, ToolCallSettled, ToolCallStarted
from tests.support.gemini_sessions import collect_until, of_type
from tests.support.vendor_sessions import VENDORS, Vendor, open_vendor_session, settled_turn

#: Long enough that only what the server says confirms a turn in these tests.
NEVER = CallPolicy(confirm_window=60.0)


def hang_up_tools(runs: list[str], stage: dict[str, Any]) -> livebridge.ToolRegistry:
    """``end_call``, recording each run and whether the turn had been confirmed by then."""
    tools = livebridge.ToolRegistry()

    @tools.tool(irreversible=True)
    async def end_call(reason: str) -> str:
        """Hang up on the caller."""
        runs.append(reason)
        stage["ran_after_confirmation"] = stage.get("confirmed", False)
        stage["ran_at"] = time.monotonic()
        return "hung up"

    return tools


async def answered(conv: Conversation, call_id: str) -> None:
    """Until the app answered ``call_id`` (a withdrawn call is no longer open, yet answered)."""
    await conv.wait_until(lambda: conv.known_calls[call_id].answer is not None, 30)


Script = Callable[[Conversation, list[str]], Awaitable[None]]


async def converse(
    vendor: Vendor,
    script: Script,
    policy: CallPolicy = NEVER,
    during: Callable[[LiveSession], Awaitable[None]] | None = None,
    then_say: str | None = None,
    stage: dict[str, Any] | None = None,
) -> tuple[list[str], dict[str, Any], list[ToolCallSettled]]:
    """The model asks for ``end_call`` once and ``script`` goes on; the handler's runs, what
    the app sent for the call (absent if nothing), and the call's settlement as the app saw it.
    ``during`` acts while the call waits for its turn; ``then_say`` is sent once it settled."""
    runs: list[str] = []
    sent: dict[str, Any] = {}
    stage = {} if stage is None else stage

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        stage["asked_at"] = time.monotonic()
        ids = await conv.tool_call([("end_call", {"reason": "bye"})])
        await script(conv, ids)
        answer = conv.known_calls[ids[0]].answer
        if answer is not None:
            sent["response"] = answer.response
        await conv.say("done")
        await conv.turn_complete()

    async with (
        Emulator(scenario, protocol=vendor) as emu,
        open_vendor_session(vendor, emu, hang_up_tools(runs, stage), policy=policy) as session,
    ):
        await session.send_text("goodbye")
        events: list[SessionEvent] = []
        if during is not None:  # while the call waits for its turn
            events += await collect_until(session, lambda e: isinstance(e, ToolCallStarted))
            await during(session)
        if then_say is not None:
            events += await collect_until(session, lambda e: isinstance(e, ToolCallSettled))
            await session.send_text(then_say)
        events += await collect_until(session, lambda e: e == TextOut("done"))
        events += await settled_turn(session)
        assert emu.violations == []
    return runs, sent, of_type(events, ToolCallSettled)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_call_whose_turn_is_interrupted_never_runs(vendor: Vendor) -> None:
    async def script(conv: Conversation, ids: list[str]) -> None:
        await conv.interrupted()  # no toolCallCancellation: the service has been seen to do so
        if vendor == "gemini":
            await answered(conv, ids[0])
        else:  # a cancelled response ends the model's turn: the user speaks next
            await conv.expect_turn()

    then_say = "so?" if vendor == "openai" else None
    runs, sent, settled = await converse(vendor, script, then_say=then_say)
    assert runs == []
    (fate,) = settled
    assert fate.ending == "cancelled"
    if vendor == "gemini":  # the model waits for an answer: it is told the call did not run
        error = sent["response"]["error"]
        assert error["type"] == "cancelled"
        assert "interrupted" in error["message"]
    else:  # a cancelled response's calls are never answered
        assert sent == {}


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_call_whose_turn_completes_runs_once(vendor: Vendor) -> None:
    stage: dict[str, Any] = {}
    app_saw_the_call = threading.Event()  # by then a handler that does not wait has run

    async def script(conv: Conversation, ids: list[str]) -> None:
        if vendor == "gemini":  # the generation is over: the turn stands
            assert await asyncio.to_thread(app_saw_the_call.wait, 30)
            stage["confirmed"] = True
            await conv.send({"serverContent": {"generationComplete": True}})
        else:  # wait_answers ends the response ``completed``: the app sees the call then
            stage["confirmed"] = True
        await conv.wait_answers(ids, timeout=30)

    async def saw(session: LiveSession) -> None:
        app_saw_the_call.set()

    during = saw if vendor == "gemini" else None
    runs, sent, settled = await converse(vendor, script, during=during, stage=stage)
    assert runs == ["bye"]
    assert stage["ran_after_confirmation"]  # not when the call arrived
    assert sent["response"] == {"output": "hung up"}
    assert [s.outcome for s in settled] == ["ok"]


async def test_gemini_a_cancelled_call_never_runs_and_is_not_answered() -> None:
    async def script(conv: Conversation, ids: list[str]) -> None:
        await conv.cancel(ids)
        await conv.wait_answers(ids, timeout=30)

    runs, sent, settled = await converse("gemini", script)
    assert runs == []
    assert sent == {}
    assert [s.ending for s in settled] == ["cancelled"]


async def test_gemini_new_user_input_withdraws_the_turn() -> None:
    async def script(conv: Conversation, ids: list[str]) -> None:
        await answered(conv, ids[0])

    async def speak_up(session: LiveSession) -> None:
        await session.send_text("actually, one more thing")

    runs, sent, settled = await converse("gemini", script, during=speak_up)
    assert runs == []
    assert sent["response"]["error"]["type"] == "cancelled"
    assert "new input" in sent["response"]["error"]["message"]
    assert [s.ending for s in settled] == ["cancelled"]


async def test_gemini_silence_for_the_confirm_window_confirms_the_turn() -> None:
    async def script(conv: Conversation, ids: list[str]) -> None:
        await conv.wait_answers(ids, timeout=30)  # nothing else is said meanwhile

    stage: dict[str, Any] = {}
    policy = CallPolicy(confirm_window=1.0)
    runs, sent, settled = await converse("gemini", script, policy=policy, stage=stage)
    assert runs == ["bye"]
    assert [s.outcome for s in settled] == ["ok"]
    assert stage["ran_at"] - stage["asked_at"] >= 0.95  # not before the window passed
    assert sent["response"] == {"output": "hung up"}
