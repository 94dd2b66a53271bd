"""A phone call on GPT-Live end to end over real sockets: the simulated caller, the bridge, and
the emulator's GPT-Live side driven through the unmodified openai SDK over TLS. The call's
μ-law goes both ways as is (``audio/pcmu``), the backend's parallel calls run concurrently, and
a reply's end is found in the silence of the continuous output track."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest
import pytest_asyncio

from livebridge.calls.observers import CallSettled, Recorder
from livebridge.calls.tools import ToolRegistry
from livebridge.demo.phone import GOODBYE, QUESTION, LivePhoneScript, phone_line, phone_tools
from livebridge.emulator import Emulator
from livebridge.phone.agent import GPT_LIVE_PHONE_CONFIG, PhoneAgent, vendor_config
from livebridge.phone.bridge import CallEnded, ModelAnswered, PhoneEvent
from livebridge.phone.caller import SimulatedCaller, speech
from livebridge.phone.playout import FRAME_BYTES
from tests.cli.test_cli_errors import OFFLINE, REPOSITORY
from tests.phone.test_phone_bridge import weather_in_parallel
from tests.support.timing import seconds

pytestmark = pytest.mark.asyncio(loop_scope="module")

MODEL = "gpt-live-1.1"
WAIT = seconds(20.0)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def emulator() -> AsyncIterator[Emulator]:
    async with Emulator(LivePhoneScript(reply_seconds=1.5), model=MODEL) as emu:
        yield emu


def sent_by_client(emu: Emulator, before: int, kind: str) -> list[dict[str, Any]]:
    return [
        e.message
        for e in emu.transcript[before:]
        if e.direction == "client" and e.message.get("type") == kind
    ]


async def test_a_call_with_parallel_tool_calls_in_ulaw_as_is(emulator: Emulator) -> None:
    tools, running = weather_in_parallel()

    before = len(emulator.transcript)
    recorder = Recorder()
    events: list[PhoneEvent] = []
    async with (
        phone_line(emulator, tools, observers=[recorder], listeners=[events.append]) as (_, url),
        SimulatedCaller.dial(url) as caller,
    ):
        await caller.say(speech(QUESTION))
        await caller.wait_until(lambda: bool(caller.echoed), WAIT)  # the reply's mark came back
        heard = caller.heard_seconds
    assert sorted(running) == ["Paris", "Tokyo"]
    assert [e.outcome.kind for e in recorder.of(CallSettled)] == ["ok", "ok"]
    (start,) = sent_by_client(emulator, before, "session.start")
    assert start["session"]["model"] == MODEL
    assert start["session"]["audio"]["format"] == {"type": "audio/pcmu", "rate": 8000}
    appended = [m["audio"] for m in sent_by_client(emulator, before, "session.input_audio.append")]
    assert appended and all(len(base64.b64decode(a)) == FRAME_BYTES for a in appended)
    assert len(sent_by_client(emulator, before, "response.create")) == 1
    # the 1.5 s reply and the half second of silence that ends it; none of the silence after
    assert 1.9 <= heard <= 2.1
    assert len([e for e in events if isinstance(e, ModelAnswered)]) == 1
    assert emulator.live is not None
    assert all(s.verdicts == [] and s.errors == [] for s in emulator.live.sessions)


async def test_end_call_hangs_up_after_the_goodbye_was_heard(emulator: Emulator) -> None:
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
    assert caller.heard_seconds - heard_before >= 0.55  # the whole 0.6 s goodbye played
    (ended,) = [e for e in events if isinstance(e, CallEnded)]
    assert ended.reason == "hung_up"
    (mark,) = ended.marks
    echoed = dict(caller.echoed)
    assert caller.closed_at is not None
    assert mark in echoed
    assert echoed[mark] <= caller.closed_at


async def test_a_gpt_live_agent_gets_ulaw_natively_and_its_voice() -> None:
    agent = PhoneAgent(ToolRegistry(), model=MODEL, instructions="Be brief.", voice="cedar")
    assert vendor_config("openai", agent) == {
        "audio": {"format": {"type": "audio/pcmu", "rate": 8000}, "output": {"voice": "cedar"}},
        "instructions": "Be brief.",
    }
    assert GPT_LIVE_PHONE_CONFIG == {"audio": {"format": {"type": "audio/pcmu", "rate": 8000}}}
    realtime = vendor_config("openai", PhoneAgent(ToolRegistry(), model="gpt-realtime-2"))
    assert "input" in realtime["audio"]


@pytest.fixture
def phone_server() -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``livebridge phone --vendor openai --model gpt-live-1.1 --emulator``, and its URL."""
    command = [
        *("phone", "examples.embedded:tools", "--emulator", "--port", "0", "--no-signature-check"),
        *("--vendor", "openai", "--model", MODEL),
    ]
    process = subprocess.Popen(
        [sys.executable, "-m", "livebridge", *command],
        cwd=REPOSITORY,
        env={**OFFLINE, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("listening on ws://127.0.0.1:"), line
        yield process, line.split()[-1]
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


async def test_the_command_answers_a_call_on_gpt_live_with_the_emulator(
    phone_server: tuple[subprocess.Popen[str], str],
) -> None:
    """The emulator's default model delegates the caller's question (two places, two parallel
    calls) and answers once they are in."""
    process, url = phone_server
    async with SimulatedCaller.dial(url) as caller:
        await caller.say(speech(QUESTION))
        await caller.wait_until(lambda: bool(caller.echoed), WAIT)
        assert caller.heard_seconds >= 0.4
    process.send_signal(signal.SIGTERM)
    assert await anyio.to_thread.run_sync(lambda: process.wait(timeout=seconds(20))) == 0
