"""Whatever a Media Streams peer sends, over a real socket, a live call goes on; a call whose
``start`` is bad ends with a ``CallEnded`` and no traceback."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

import anyio
import pytest
import pytest_asyncio
from anyio import from_thread
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import connect

from livebridge.demo.phone import QUESTION, PhoneScript, phone_line, phone_tools
from livebridge.emulator import Emulator
from livebridge.phone.bridge import CallEnded, DtmfPressed, FrameSkipped, PhoneEvent, PhoneOptions
from livebridge.phone.caller import SimulatedCaller, speech
from tests.phone.test_phone_twilio import START, mangled, nested, start_with
from tests.support.hypothesis_profiles import examples
from tests.support.timing import seconds

pytestmark = pytest.mark.asyncio(loop_scope="module")

WAIT = seconds(20.0)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def emulator() -> AsyncIterator[Emulator]:
    async with Emulator(PhoneScript(reply_seconds=1.0)) as emu:
        yield emu


def ends_the_call(frame: str | bytes) -> bool:
    """A ``stop``: the one frame that rightly ends a call."""
    text = frame.decode(errors="replace") if isinstance(frame, bytes) else frame
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        return '"stop"' in text
    return isinstance(message, dict) and message.get("event") == "stop"


def tracebacks(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


async def test_a_live_call_goes_on_whatever_frames_arrive(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    events: list[PhoneEvent] = []
    async with (
        phone_line(emulator, phone_tools(0.05), listeners=[events.append]) as (_, url),
        SimulatedCaller.dial(url) as caller,
    ):
        probes = 0

        async def probe() -> None:
            """A key press after the frames: once it is heard, every frame before it was read."""
            await caller.press("5")
            await caller.wait_until(lambda: events.count(DtmfPressed("5")) >= probes, WAIT)

        @settings(
            max_examples=examples(60),
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(st.lists(mangled(), min_size=1, max_size=6))
        def throw(frames: list[str | bytes]) -> None:
            nonlocal probes
            for frame in frames:
                if not ends_the_call(frame):
                    from_thread.run(caller.websocket.send, frame)
            probes += 1
            from_thread.run(probe)
            assert caller.closed_at is None
            assert not [e for e in events if isinstance(e, CallEnded)]

        with caplog.at_level(logging.WARNING):
            await anyio.to_thread.run_sync(throw)
            for frame in (start_with(sampleRate="8k"), start_with(sampleRate=None)):
                await caller.send_raw(frame)
            for field in ("media", "mark", "customParameters"):
                await caller.send_raw(f'{{"event": "media", "{field}": {nested(20_000)}}}')
            await caller.say(speech(QUESTION))
            await caller.wait_until(lambda: bool(caller.echoed), WAIT)  # answered and heard
    assert caller.close_code is None or caller.close_code == 1000
    assert [e.reason for e in events if isinstance(e, CallEnded)] == ["caller_hung_up"]
    assert any(isinstance(e, FrameSkipped) for e in events)
    assert not tracebacks(caplog)


@pytest.mark.parametrize(
    "start",
    [
        start_with(sampleRate="8k"),
        start_with(sampleRate=None),
        json.dumps(START).replace('"+15550100"', nested(20_000)),
    ],
    ids=["rate-8k", "rate-null", "deep-parameters"],
)
async def test_a_call_whose_start_is_bad_ends_without_a_session(
    emulator: Emulator, caplog: pytest.LogCaptureFixture, start: str
) -> None:
    events: list[PhoneEvent] = []
    sessions = len(emulator.sessions)
    phone = PhoneOptions(start_timeout=1.0)
    with caplog.at_level(logging.WARNING):
        async with phone_line(
            emulator, phone_tools(0.05), listeners=[events.append], phone=phone
        ) as (_, url):
            async with connect(url) as websocket:
                await websocket.send(json.dumps({"event": "connected", "protocol": "Call"}))
                await websocket.send(start)
                with anyio.fail_after(WAIT):
                    await websocket.wait_closed()
            assert websocket.close_code == 1008
            assert websocket.close_reason == "no start message"
    skipped, ended = events
    assert isinstance(skipped, FrameSkipped) and skipped.reason in ("bad_start", "undecodable")
    assert ended == CallEnded("disconnected", answered=False)
    assert len(emulator.sessions) == sessions  # no Live session was opened
    assert not tracebacks(caplog)
    assert any("skipped a Twilio frame" in r.getMessage() for r in caplog.records)
