"""A phone call on OpenAI Realtime: μ-law both ways as is (audio/pcmu), over real sockets."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from livebridge.demo.phone import GOODBYE, QUESTION, PhoneScript, phone_line, phone_tools
from livebridge.emulator import Emulator
from livebridge.phone.bridge import BargedIn, CallEnded, PhoneEvent
from livebridge.phone.caller import SimulatedCaller, speech, tone
from livebridge.phone.playout import FRAME_BYTES

WAIT = 20.0


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def emulator() -> AsyncIterator[Emulator]:
    async with Emulator(PhoneScript(reply_seconds=1.5), protocol="openai") as emu:
        yield emu


@pytest.mark.asyncio(loop_scope="module")
async def test_a_call_sends_and_plays_ulaw_as_is(emulator: Emulator) -> None:
    before = len(emulator.transcript)
    events: list[PhoneEvent] = []
    async with (
        phone_line(emulator, phone_tools(0.05), listeners=[events.append]) as (_, url),
        SimulatedCaller.dial(url) as caller,
    ):
        await caller.say(speech(QUESTION))
        await caller.wait_until(lambda: bool(caller.echoed), WAIT)
        heard_before = caller.heard_seconds
        await caller.say(speech(GOODBYE))
        await caller.wait_until(lambda: caller.closed_at is not None, WAIT)
    assert caller.close_code == 1000
    assert abs(heard_before - 1.5) < 0.05  # the whole answer, at 8 kHz: no resampling
    assert caller.heard_seconds - heard_before >= 0.55  # and the whole goodbye
    assert [e.reason for e in events if isinstance(e, CallEnded)] == ["hung_up"]
    sent = [e.message for e in emulator.transcript[before:] if e.direction == "client"]
    (update,) = [m for m in sent if m.get("type") == "session.update"]
    formats = {d: update["session"]["audio"][d]["format"] for d in ("input", "output")}
    assert formats == {"input": {"type": "audio/pcmu"}, "output": {"type": "audio/pcmu"}}
    appended = [m["audio"] for m in sent if m.get("type") == "input_audio_buffer.append"]
    assert appended and all(len(base64.b64decode(a)) == FRAME_BYTES for a in appended)


@pytest.mark.asyncio(loop_scope="module")
async def test_barge_in_clears_at_once_and_truncates_at_what_was_heard(
    emulator: Emulator,
) -> None:
    before = len(emulator.transcript)
    events: list[PhoneEvent] = []
    async with (
        phone_line(emulator, phone_tools(0.05), listeners=[events.append]) as (_, url),
        SimulatedCaller.dial(url) as caller,
    ):
        await caller.say(speech(QUESTION))
        await caller.wait_until(lambda: caller.heard_seconds >= 0.3, WAIT)
        spoke = caller.clock()
        await caller.say(tone(0.3))
        await caller.wait_until(lambda: bool(caller.cleared), WAIT)
        assert caller.cleared[0] - spoke < 0.2
        assert caller.heard_seconds < 1.0
    (barge,) = [e for e in events if isinstance(e, BargedIn)]
    sent = [e.message for e in emulator.transcript[before:] if e.direction == "client"]
    (truncate,) = [m for m in sent if m.get("type") == "conversation.item.truncate"]
    assert truncate["content_index"] == 0
    assert truncate["audio_end_ms"] == round(barge.played * 1000)
    assert 300 <= truncate["audio_end_ms"] < 1000  # what the caller heard before speaking
    served = [
        e.message.get("type") for e in emulator.transcript[before:] if e.direction != "client"
    ]
    assert "conversation.item.truncated" in served and "error" not in served


def test_the_protocol_takes_8_khz_ulaw_for_audio_pcmu() -> None:
    from livebridge.calls.tools import ToolRegistry
    from livebridge.vendors.openai.protocol import OpenAIRealtimeProtocol

    phone = OpenAIRealtimeProtocol(ToolRegistry(), g711=(True, True))
    assert (phone.input_encoding, phone.input_rate(None), phone.input_rate(8000)) == (
        "pcmu",
        8000,
        8000,
    )
    with pytest.raises(ValueError, match="8 kHz"):
        phone.input_rate(24_000)
    pcm = OpenAIRealtimeProtocol(ToolRegistry())
    assert (pcm.input_encoding, pcm.input_rate(None)) == ("pcm16", 24_000)
