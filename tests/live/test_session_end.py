"""What the app's ``async with`` block sees when the session ends, on every way out.

The service or the connection ending the session interrupts the block at its pending await and
``async with`` raises ``SessionEndedError`` with the ``Closed`` reason; a block that returns or
raises, a close the app asked for and a cancellation from outside are left as they were. Each
test drives a real ``LiveSession`` against the emulator over TLS.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import anyio
import pytest

import livebridge
from livebridge import SessionOptions
from livebridge.emulator import Conversation, Emulator
from livebridge.errors import SessionClosedError, SessionEndedError
from livebridge.protocol.events import Closed, SessionEvent
from tests.support.gemini_sessions import open_session

Ending = Callable[[Conversation, Emulator], Awaitable[None]]

#: Long enough that a block still waiting when the test ends was never interrupted.
SLEEP = 30.0


async def _service_close(conv: Conversation, emu: Emulator) -> None:
    await conv.resumption_update()
    await conv.close(1000, "")


async def _internal_error_without_handle(conv: Conversation, emu: Emulator) -> None:
    await conv.close(1011, "Internal error encountered.")


async def _dropped_no_reconnects(conv: Conversation, emu: Emulator) -> None:
    await conv.resumption_update()
    conv.session.abort()


async def _handle_expired(conv: Conversation, emu: Emulator) -> None:
    await conv.resumption_update()
    emu.expire_handles()
    conv.session.abort()


ENDINGS: dict[str, tuple[Ending, str, type[Exception] | None]] = {
    "service_close": (_service_close, "the service closed the session", None),
    "1011_without_handle": (
        _internal_error_without_handle,
        "before the service issued a resumption handle",
        livebridge.ConnectionLostError,
    ),
    "connection_lost": (_dropped_no_reconnects, "gave up after 0 reconnects", None),
    "handle_expired": (_handle_expired, "stale", livebridge.SessionNotFoundError),
}


def _scenario(ending: Ending, emu_ref: list[Emulator]) -> Callable[[Conversation], Awaitable[None]]:
    async def scenario(conv: Conversation) -> None:
        if conv.resumed_from is not None:  # the resumption the handle_expired case refuses
            await conv.expect_turn(timeout=SLEEP)
            return
        await conv.expect_turn()
        await ending(conv, emu_ref[0])

    return scenario


@pytest.mark.parametrize("name", ENDINGS)
async def test_an_end_the_app_did_not_ask_for_interrupts_the_block_and_raises(name: str) -> None:
    ending, reason, error = ENDINGS[name]
    emu_ref: list[Emulator] = []
    reached: list[str] = []
    options = SessionOptions(reconnect_attempts=0 if name == "connection_lost" else 5)
    async with Emulator(_scenario(ending, emu_ref)) as emu:
        emu_ref.append(emu)
        began = time.monotonic()
        with pytest.raises(SessionEndedError) as raised:
            async with open_session(emu, livebridge.ToolRegistry(), options=options) as session:
                await session.send_text("hello")
                try:
                    await anyio.sleep(SLEEP)
                    reached.append("next line")
                finally:
                    reached.append("finally")
        assert time.monotonic() - began < SLEEP / 2
    assert reached == ["finally"]  # interrupted at the pending await, cleanup ran
    ended = raised.value
    assert isinstance(ended, SessionClosedError)
    assert reason in ended.reason and reason in str(ended)
    assert session.closed is not None and ended.reason == session.closed.reason
    if error is not None:
        assert isinstance(ended.error, error)
        assert ended.__cause__ is ended.error
    events = [event async for event in session.events()]  # still readable, ending cleanly
    assert events[-1] == session.closed


async def test_a_block_reading_events_gets_the_same_error_and_the_rest_after() -> None:
    emu_ref: list[Emulator] = []
    async with Emulator(_scenario(_service_close, emu_ref)) as emu:
        emu_ref.append(emu)
        seen: list[SessionEvent] = []
        with pytest.raises(SessionEndedError, match="the service closed the session"):
            async with open_session(emu, livebridge.ToolRegistry()) as session:
                await session.send_text("hello")
                async for event in session.events():
                    seen.append(event)
    rest = [event async for event in session.events()]
    assert isinstance((seen + rest)[-1], Closed)


async def test_input_after_the_end_names_why_the_session_ended() -> None:
    emu_ref: list[Emulator] = []
    async with Emulator(_scenario(_service_close, emu_ref)) as emu:
        emu_ref.append(emu)
        with pytest.raises(SessionEndedError):
            async with open_session(emu, livebridge.ToolRegistry()) as session:
                await session.send_text("hello")
                with anyio.CancelScope(shield=True):  # the block chooses to go on a moment
                    while session.closed is None:
                        await session.next_event()
                    with pytest.raises(SessionEndedError, match="the service closed"):
                        await session.send_text("still there?")


async def _quiet(conv: Conversation) -> None:
    await conv.expect_turn(timeout=SLEEP)


async def test_a_block_that_returns_raises_nothing() -> None:
    async with Emulator(_quiet) as emu, open_session(emu, livebridge.ToolRegistry()) as session:
        await session.send_text("hello")
    assert session.closed == Closed("closed by the app")


async def test_the_blocks_own_exception_is_what_async_with_raises() -> None:
    async with Emulator(_quiet) as emu:
        with pytest.raises(KeyError, match="mine"):
            async with open_session(emu, livebridge.ToolRegistry()):
                raise KeyError("mine")


async def test_after_the_app_closes_the_session_the_block_runs_on() -> None:
    reached: list[str] = []
    async with Emulator(_quiet) as emu, open_session(emu, livebridge.ToolRegistry()) as session:
        await session.aclose()
        await anyio.sleep(0.05)  # a checkpoint: nothing cancels the block
        reached.append("after aclose")
    assert reached == ["after aclose"]
    assert session.closed == Closed("closed by the app")


async def test_a_cancellation_from_outside_stays_a_cancellation() -> None:
    async with Emulator(_quiet) as emu:
        with anyio.move_on_after(0.5) as outer:
            async with open_session(emu, livebridge.ToolRegistry()) as session:
                await anyio.sleep(SLEEP)
        assert outer.cancelled_caught
    assert session.closed == Closed("closed by the app")
