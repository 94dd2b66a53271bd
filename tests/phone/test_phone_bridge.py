"""A phone call end to end over real sockets: the simulated caller, the bridge, the emulator (both
vendors where a call goes the same way on each)."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
import pytest_asyncio

from livebridge.calls.observers import CallOrphaned, CallSettled, CallStarted, Recorder
from livebridge.calls.tools import ToolRegistry
from livebridge.demo.phone import GOODBYE, QUESTION, PhoneScript, phone_line, phone_tools
from livebridge.emulator import Emulator
from livebridge.live.options import SessionOptions
from livebridge.phone.bridge import BargedIn, CallEnded, DtmfPressed, FrameSkipped, PhoneEvent
from livebridge.phone.caller import SimulatedCaller, speech, tone
from livebridge.phone.playout import FRAME_BYTES
from tests.support.timing import seconds

pytestmark = pytest.mark.asyncio(loop_scope="module")

#: Generous bound for anything that waits on a real-time exchange.
WAIT = seconds(20.0)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def emulator() -> AsyncIterator[Emulator]:
    async with Emulator(PhoneScript(reply_seconds=1.5)) as emu:
        yield emu


def close_codes(emu: Emulator, connections: int) -> list[int]:
    """The close codes the emulator received on the connections opened after the first
    ``connections`` (another test's connection may be judged late: it is not counted)."""
    ours = {session.id for session in emu.sessions[connections:]}
    return [
        entry.message["close"]["code"]
        for entry in emu.transcript
        if entry.session in ours and entry.direction == "client" and "close" in entry.message
    ]


def fates(recorder: Recorder) -> tuple[set[str], set[str]]:
    started = {e.call.id or "" for e in recorder.of(CallStarted)}
    ended = {e.call.id or "" for e in recorder.of(CallSettled)}
    ended |= {e.call_id for e in recorder.of(CallOrphaned)}
    return started, ended


def weather_in_parallel() -> tuple[ToolRegistry, list[str]]:
    """A registry whose ``get_weather`` answers only once two calls run at the same time, and
    the cities it was asked for."""
    both = anyio.Event()
    running: list[str] = []
    tools = ToolRegistry()

    @tools.tool(timeout=10.0)
    async def get_weather(city: str) -> dict[str, object]:
        """The weather in a city."""
        running.append(city)
        if len(running) == 2:
            both.set()
        with anyio.fail_after(WAIT):
            await both.wait()  # only returns if the two calls run at the same time
        return {"sky": "sunny"}

    return tools, running


async def test_a_call_with_parallel_tool_calls(emulator: Emulator) -> None:
    tools, running = weather_in_parallel()

    recorder = Recorder()
    async with (
        phone_line(emulator, tools, observers=[recorder]) as (_, url),
        SimulatedCaller.dial(url) as caller,
    ):
        await caller.say(speech(QUESTION))
        await caller.wait_until(lambda: bool(caller.echoed), WAIT)
        assert caller.heard_seconds >= 1.0  # the spoken answer reached the caller
    assert sorted(running) == ["Paris", "Tokyo"]
    assert [e.outcome.kind for e in recorder.of(CallSettled)] == ["ok", "ok"]


@dataclass(frozen=True, slots=True)
class Line:
    """An emulator of one vendor for the calls both vendors take alike."""

    vendor: str
    emulator: Emulator


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["gemini", "openai"])
async def line(request: pytest.FixtureRequest, emulator: Emulator) -> AsyncIterator[Line]:
    if request.param == "gemini":
        yield Line("gemini", emulator)
        return
    async with Emulator(PhoneScript(reply_seconds=1.5), protocol="openai") as emu:
        yield Line("openai", emu)


def sent_by_client(emu: Emulator, before: int) -> list[dict[str, Any]]:
    return [e.message for e in emu.transcript[before:] if e.direction == "client"]


def _ulaw_both_ways(emu: Emulator, before: int, answer_heard: float) -> None:
    """OpenAI takes and plays μ-law as is (audio/pcmu)."""
    assert abs(answer_heard - 1.5) < 0.05  # the whole answer, at 8 kHz: no resampling
    sent = sent_by_client(emu, before)
    (update,) = [m for m in sent if m.get("type") == "session.update"]
    formats = {d: update["session"]["audio"][d]["format"] for d in ("input", "output")}
    assert formats == {"input": {"type": "audio/pcmu"}, "output": {"type": "audio/pcmu"}}
    appended = [m["audio"] for m in sent if m.get("type") == "input_audio_buffer.append"]
    assert appended and all(len(base64.b64decode(a)) == FRAME_BYTES for a in appended)


def _truncated_at_what_was_heard(emu: Emulator, before: int, barge: BargedIn) -> None:
    """OpenAI is told how much of the answer the caller heard."""
    (truncate,) = [
        m for m in sent_by_client(emu, before) if m.get("type") == "conversation.item.truncate"
    ]
    assert truncate["content_index"] == 0
    assert truncate["audio_end_ms"] == round(barge.played * 1000)
    assert 300 <= truncate["audio_end_ms"] < 1000  # what the caller heard before speaking
    served = [e.message.get("type") for e in emu.transcript[before:] if e.direction != "client"]
    assert "conversation.item.truncated" in served and "error" not in served


#: What a whole call shows on each vendor's wire, after the bridge's part.
CALL_CHECKS: dict[str, Callable[[Emulator, int, float], None]] = {
    "gemini": lambda emu, before, heard: None,
    "openai": _ulaw_both_ways,
}
#: The least of the 0.6 s goodbye each vendor's path must play.
GOODBYE_HEARD = {"gemini": 0.5, "openai": 0.55}
#: What a barge-in shows on each vendor's wire, after the bridge's part.
BARGE_IN_CHECKS: dict[str, Callable[[Emulator, int, BargedIn], None]] = {
    "gemini": lambda emu, before, barge: None,
    "openai": _truncated_at_what_was_heard,
}


async def test_barge_in_during_model_audio_clears_at_once(line: Line) -> None:
    emu = line.emulator
    before = len(emu.transcript)
    events: list[PhoneEvent] = []
    async with (
        phone_line(emu, phone_tools(0.05), listeners=[events.append]) as (_, url),
        SimulatedCaller.dial(url) as caller,
    ):
        await caller.say(speech(QUESTION))
        await caller.wait_until(lambda: caller.heard_seconds >= 0.3, WAIT)
        assert caller.heard_seconds < 1.0  # of the 1.5 s answer: the model is still speaking
        spoke = caller.clock()
        await caller.say(tone(0.3))
        await caller.wait_until(lambda: bool(caller.cleared), WAIT)
        assert caller.cleared[0] - spoke < 0.2
        assert caller.buffered == 0.0
        assert caller.heard_seconds < 1.0
    (barge,) = [e for e in events if isinstance(e, BargedIn)]
    assert barge.unheard > 0.0
    BARGE_IN_CHECKS[line.vendor](emu, before, barge)


async def test_end_call_hangs_up_after_the_goodbye_was_heard(line: Line) -> None:
    emu = line.emulator
    before = len(emu.transcript)
    events: list[PhoneEvent] = []
    async with (
        phone_line(emu, phone_tools(0.05), listeners=[events.append]) as (_, url),
        SimulatedCaller.dial(url) as caller,
    ):
        await caller.say(speech(QUESTION))
        await caller.wait_until(lambda: bool(caller.echoed), WAIT)
        heard_before = caller.heard_seconds
        await caller.say(speech(GOODBYE))
        await caller.wait_until(lambda: caller.closed_at is not None, WAIT)
    assert caller.close_code == 1000
    goodbye = caller.heard_seconds - heard_before
    assert goodbye >= GOODBYE_HEARD[line.vendor]  # the whole goodbye played, not cut off
    (ended,) = [e for e in events if isinstance(e, CallEnded)]
    assert ended.reason == "hung_up"
    (mark,) = ended.marks  # the mark sent before end_call ran ...
    echoed = dict(caller.echoed)
    assert caller.closed_at is not None
    assert mark in echoed  # ... came back before the stream closed
    assert echoed[mark] <= caller.closed_at
    assert caller.heard[-1].end <= caller.closed_at + 0.03
    CALL_CHECKS[line.vendor](emu, before, heard_before)


async def test_the_caller_hanging_up_mid_call_gives_every_call_a_fate(emulator: Emulator) -> None:
    started = anyio.Event()
    tools = ToolRegistry()

    @tools.tool(timeout=30.0)
    async def get_weather(city: str) -> dict[str, object]:
        """Never answers in time: the caller hangs up first."""
        started.set()
        await anyio.sleep(60)
        return {}

    recorder = Recorder()
    before = len(emulator.sessions)
    options = SessionOptions(shutdown_grace=0.2)
    events: list[PhoneEvent] = []
    ended_call = anyio.Event()

    def listen(event: PhoneEvent) -> None:
        events.append(event)
        if isinstance(event, CallEnded):
            ended_call.set()

    async with phone_line(
        emulator, tools, observers=[recorder], options=options, listeners=[listen]
    ) as (_, url):
        async with SimulatedCaller.dial(url) as caller:
            await caller.say(speech(QUESTION))
            with anyio.fail_after(WAIT):
                await started.wait()
            await caller.press("5")
            await caller.hang_up()
        with anyio.fail_after(WAIT):
            await ended_call.wait()
    await emulator.settled()
    called, ended = fates(recorder)
    assert called and called == ended
    assert close_codes(emulator, before) == [1000]
    assert DtmfPressed("5") in events
    assert [e.reason for e in events if isinstance(e, CallEnded)] == ["caller_hung_up"]


async def test_bad_twilio_frames_are_skipped_and_the_call_goes_on(emulator: Emulator) -> None:
    events: list[PhoneEvent] = []
    async with (
        phone_line(emulator, phone_tools(0.05), listeners=[events.append]) as (_, url),
        SimulatedCaller.dial(url) as caller,
    ):
        await caller.send({"event": "unheard-of"})
        await caller.send({"event": "media", "media": {"payload": "%%% not base64 %%%"}})
        await caller.send_raw("{this is not json")
        await caller.say(speech(QUESTION))
        await caller.wait_until(lambda: bool(caller.echoed), WAIT)
    skipped = [e.reason for e in events if isinstance(e, FrameSkipped)]
    assert skipped == ["unknown_event", "bad_payload", "undecodable"]


async def test_media_before_start_is_skipped(emulator: Emulator) -> None:
    events: list[PhoneEvent] = []
    async with phone_line(emulator, phone_tools(0.05), listeners=[events.append]) as (_, url):
        from websockets.asyncio.client import connect

        async with connect(url) as websocket:
            media = {"event": "media", "media": {"payload": "/w=="}}
            await websocket.send(json.dumps(media))
            await websocket.send(json.dumps({"event": "stop"}))
            await websocket.wait_closed()
    assert FrameSkipped("media_before_start") in events
    assert [e.reason for e in events if isinstance(e, CallEnded)] == ["disconnected"]


async def test_a_session_that_cannot_open_ends_the_call_with_1011() -> None:
    from contextlib import asynccontextmanager

    from livebridge.errors import ModelNotFoundError
    from livebridge.live.session import LiveSession
    from livebridge.phone.bridge import PhoneBridge
    from livebridge.phone.server import serve_phone
    from livebridge.phone.twilio import StreamStarted

    @asynccontextmanager
    async def unreachable(start: StreamStarted) -> AsyncIterator[LiveSession]:
        raise ModelNotFoundError("no such model")
        yield  # pragma: no cover

    events: list[PhoneEvent] = []
    bridge = PhoneBridge(unreachable, listeners=[events.append])
    async with serve_phone(bridge) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        async with SimulatedCaller.dial(f"ws://127.0.0.1:{port}/twilio") as caller:
            await caller.wait_until(lambda: caller.closed_at is not None, WAIT)
    assert caller.close_code == 1011
    sid = "CA00000000000000000000000000000001"
    assert events == [CallEnded("session_failed", answered=False, call_sid=sid)]


async def test_dtmf_reaches_the_app_and_optionally_the_model(emulator: Emulator) -> None:
    from livebridge.phone.bridge import PhoneOptions

    before = len(emulator.transcript)
    events: list[PhoneEvent] = []
    phone = PhoneOptions(dtmf_to_model=True)
    async with (
        phone_line(emulator, phone_tools(0.05), listeners=[events.append], phone=phone) as (_, u),
        SimulatedCaller.dial(u) as caller,
    ):
        await caller.press("7")
        await caller.press("#")

        def told() -> list[str]:
            return [
                e.message["realtimeInput"]["text"]
                for e in emulator.transcript[before:]
                if e.direction == "client" and "text" in e.message.get("realtimeInput", {})
            ]

        await caller.wait_until(lambda: len(told()) == 2, WAIT)
    assert told() == ["The caller pressed 7.", "The caller pressed #."]
    assert [e for e in events if isinstance(e, DtmfPressed)] == [DtmfPressed("7"), DtmfPressed("#")]
