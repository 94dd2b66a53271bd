"""A persona per call, over real sockets: the webhook tells the stream who called, the app's
agent function chooses the call's instructions and voice, and they reach the Live setup (Gemini
and OpenAI emulators)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest
import pytest_asyncio

from livebridge.demo.phone import PhoneScript, phone_line, phone_tools
from livebridge.emulator import Emulator
from livebridge.phone import IncomingCall, PhoneAgent
from livebridge.phone.bridge import CallEnded, PhoneEvent
from livebridge.phone.caller import SimulatedCaller, ring
from tests.support.timing import seconds

pytestmark = pytest.mark.asyncio(loop_scope="module")

WAIT = seconds(20.0)
TOKEN = "a-token-for-the-agent-tests"


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["gemini", "openai"])
async def emulator(request: pytest.FixtureRequest) -> AsyncIterator[Emulator]:
    async with Emulator(PhoneScript(), protocol=request.param) as emu:
        yield emu


def setups(emu: Emulator, before: int) -> list[dict[str, Any]]:
    """The session setups clients sent since the ``before``-th transcript entry."""
    found = []
    for entry in emu.transcript[before:]:
        if entry.direction != "client":
            continue
        if "setup" in entry.message:
            found.append(entry.message["setup"])
        elif entry.message.get("type") == "session.update":
            found.append(entry.message["session"])
    return found


def setups_reach(emu: Emulator, before: int, count: int) -> Callable[[], bool]:
    return lambda: len(setups(emu, before)) >= count


def persona(setup: dict[str, Any]) -> tuple[str | None, str | None]:
    """The instructions and the voice a setup carries (either vendor's shape)."""
    if "generationConfig" in setup or "systemInstruction" in setup:  # Gemini's
        system = setup.get("systemInstruction") or {}
        text = "".join(p.get("text", "") for p in system.get("parts", [])) or None
        speech = (setup.get("generationConfig") or {}).get("speechConfig") or {}
        voice = ((speech.get("voiceConfig") or {}).get("prebuiltVoiceConfig") or {}).get(
            "voiceName"
        )
        return text, voice
    return setup.get("instructions"), ((setup.get("audio") or {}).get("output") or {}).get("voice")


async def test_each_call_gets_the_persona_its_agent_chose(emulator: Emulator) -> None:
    seen: list[IncomingCall] = []

    def agent(call: IncomingCall) -> PhoneAgent:
        seen.append(call)
        vip = call.from_number == "+15550111"
        return PhoneAgent(
            phone_tools(),
            instructions=f"You answer {call.to_number} for {call.from_number}."
            + (" Be brief." if vip else ""),
            voice="Kore" if vip else "Puck",
        )

    before = len(emulator.transcript)
    ended: list[PhoneEvent] = []
    done = anyio.Event()

    def listen(event: PhoneEvent) -> None:
        ended.append(event)
        if sum(isinstance(e, CallEnded) for e in ended) == 2:
            done.set()

    async with phone_line(emulator, agent, auth_token=TOKEN, listeners=[listen]) as (_, url):
        webhook = url.replace("ws://", "http://").replace("/twilio", "/twiml")
        for n, (caller_id, method) in enumerate((("+15550111", "POST"), ("+15550122", "GET"))):
            form = {"CallSid": f"CA{n}", "From": caller_id, "To": "+15550199"}
            if method == "GET":
                from urllib.parse import urlencode

                rung = await ring(
                    f"{webhook}?{urlencode(form)}", auth_token=TOKEN, method="GET", form=form
                )
            else:
                rung = await ring(webhook, auth_token=TOKEN, form=form)
            assert rung.status == 200, rung
            assert rung.parameters == {"From": caller_id, "To": "+15550199"}
            stream = rung.stream_url
            assert stream is not None
            async with SimulatedCaller.dial(
                url,
                call_sid=f"CA{n}",
                auth_token=TOKEN,
                signed_url=stream,
                parameters=rung.parameters,
            ):
                await emulator.wait_for(setups_reach(emulator, before, n + 1), WAIT)
        with anyio.fail_after(WAIT):
            await done.wait()
    assert [(c.call_sid, c.from_number, c.to_number) for c in seen] == [
        ("CA0", "+15550111", "+15550199"),
        ("CA1", "+15550122", "+15550199"),
    ]
    assert [persona(s) for s in setups(emulator, before)] == [
        ("You answer +15550199 for +15550111. Be brief.", "Kore"),
        ("You answer +15550199 for +15550122.", "Puck"),
    ]


async def test_an_agent_that_fails_ends_its_call_not_the_line(emulator: Emulator) -> None:
    calls = 0

    async def agent(call: IncomingCall) -> PhoneAgent:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise LookupError("no persona for this number")
        return PhoneAgent(phone_tools(), instructions="Second call.")

    before = len(emulator.transcript)
    events: list[PhoneEvent] = []
    async with phone_line(emulator, agent, listeners=[events.append]) as (_, url):
        async with SimulatedCaller.dial(url) as first:
            await first.wait_until(lambda: first.closed_at is not None, WAIT)
        assert first.close_code == 1011
        async with SimulatedCaller.dial(url):
            await emulator.wait_for(lambda: len(setups(emulator, before)) == 1, WAIT)
    assert persona(setups(emulator, before)[0])[0] == "Second call."
