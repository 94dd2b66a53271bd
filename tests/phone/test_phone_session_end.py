"""A call whose Live session ends on its own, or does not open before the caller leaves: the
simulated caller, the bridge and the emulator over real sockets. Every call ends in one
``CallEnded`` and ``livebridge_phone_calls_active`` goes back to 0."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from prometheus_client import CollectorRegistry

from livebridge.calls.tools import ToolRegistry
from livebridge.demo.phone import QUESTION, phone_line, phone_tools
from livebridge.emulator import Conversation, Emulator, Faults
from livebridge.live.options import SessionOptions
from livebridge.phone.bridge import CallAnswered, CallEnded, PhoneEvent
from livebridge.phone.caller import SimulatedCaller, speech
from livebridge.phone.metrics import PhoneMetrics
from tests.support.timing import seconds

#: Generous bound for anything that waits on a real-time exchange.
WAIT = seconds(20.0)


class Calls:
    """The bridge's events and its metrics, with a way to wait for the end of the call."""

    def __init__(self) -> None:
        self.events: list[PhoneEvent] = []
        self.registry = CollectorRegistry()
        self.metrics = PhoneMetrics(self.registry)
        self.ended = anyio.Event()

    def __call__(self, event: PhoneEvent) -> None:
        self.events.append(event)
        self.metrics(event)
        if isinstance(event, CallEnded):
            self.ended.set()

    @property
    def active(self) -> float | None:
        return self.registry.get_sample_value("livebridge_phone_calls_active")

    def endings(self) -> list[CallEnded]:
        return [e for e in self.events if isinstance(e, CallEnded)]


@pytest.mark.parametrize(
    ("code", "reason", "ended", "stream_code"),
    [
        (1011, "Internal error encountered.", "session_failed", 1011),
        (1000, "", "session_closed", 1000),
    ],
)
async def test_a_session_the_service_ends_mid_call_ends_the_call(
    code: int, reason: str, ended: str, stream_code: int
) -> None:
    async def scenario(conv: Conversation) -> None:  # no handle: the session cannot resume
        await conv.expect_turn()
        await conv.close(code, reason)

    calls = Calls()
    async with (
        Emulator(scenario) as emu,
        phone_line(emu, phone_tools(0.05), listeners=[calls]) as (_, url),
        SimulatedCaller.dial(url) as caller,
    ):
        await caller.say(speech(QUESTION))
        with anyio.fail_after(WAIT):
            await calls.ended.wait()
        await caller.wait_until(lambda: caller.closed_at is not None, WAIT)
    assert [type(e) for e in calls.events if isinstance(e, CallAnswered | CallEnded)] == [
        CallAnswered,
        CallEnded,
    ]
    assert [(e.reason, e.answered) for e in calls.endings()] == [(ended, True)]
    assert calls.active == 0
    assert caller.close_code == stream_code


async def test_a_caller_who_hangs_up_while_the_session_opens_abandons_the_opening() -> None:
    def no_setup_complete(payload: dict[str, Any]) -> bool:
        return "setupComplete" in payload

    calls = Calls()
    options = SessionOptions(connect_timeout=300.0)  # the opening would outlast the test
    async with Emulator(faults=Faults(drop=no_setup_complete)) as emu:
        async with phone_line(emu, ToolRegistry(), listeners=[calls], options=options) as (_, u):
            async with SimulatedCaller.dial(u) as caller:
                await emu.wait_for(lambda: bool(emu.connections), WAIT)  # the opening began
                await caller.hang_up()
            with anyio.fail_after(WAIT):
                await calls.ended.wait()
        with anyio.fail_after(WAIT):
            await emu.settled()  # the service side of the opening connection is closed
    assert [(e.reason, e.answered) for e in calls.endings()] == [("caller_hung_up", False)]
    assert calls.active == 0
    assert len(emu.connections) == 1
