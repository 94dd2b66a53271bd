"""The checks that need timing or payloads: each fires on a faulty client written with the plain
google-genai SDK, and stays silent for ``livebridge.LiveSession`` in the same conversation."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from google.genai import errors, live, types

import livebridge
from livebridge.emulator import Emulator
from livebridge.protocol.events import SessionEvent, ToolCallSettled, TurnComplete
from tests.support.gemini_clients import (
    MODEL,
    answer,
    next_message,
    tool_call,
    until_turn_complete,
    weather_config,
)
from tests.support.gemini_sessions import collect_until, open_session

QUESTION = "Weather in Oslo, Lima and Pune?"
LOOKUP_SECONDS = 0.15  # what one weather lookup takes
HELD_AFTER = 1.5  # the emulator's held_answers threshold in these tests
CLIENT_WAIT = 2.5  # how long the faulty gather waits for its slowest call

FaultyClient = Callable[[live.AsyncSession], Awaitable[None]]


async def serial_loop(session: live.AsyncSession) -> None:
    """Runs each lookup in turn and answers each call on its own."""
    await session.send_realtime_input(text=QUESTION)
    for call in (await tool_call(session)).function_calls or []:
        await asyncio.sleep(LOOKUP_SECONDS)  # the lookup itself
        await session.send_tool_response(function_responses=[answer(call)])
    await until_turn_complete(session)


async def gather_held_by_timeout(session: live.AsyncSession) -> None:
    """Gathers the lookups with one overall timeout: a stuck one holds the fast answers."""
    await session.send_realtime_input(text=QUESTION)
    calls = (await tool_call(session)).function_calls or []

    async def lookup(call: types.FunctionCall) -> types.FunctionResponse:
        if (call.args or {}).get("city") == "Pune":
            await asyncio.Event().wait()  # a backend that never answers
        return answer(call)

    tasks = {asyncio.create_task(lookup(call)): call for call in calls}
    done, stuck = await asyncio.wait(tasks, timeout=CLIENT_WAIT)
    for task in stuck:
        task.cancel()
    late = [
        types.FunctionResponse(
            id=tasks[task].id, name=tasks[task].name, response={"error": {"type": "timeout"}}
        )
        for task in stuck
    ]
    await session.send_tool_response(function_responses=[t.result() for t in done] + late)
    await until_turn_complete(session)


async def string_error(session: live.AsyncSession) -> None:
    """Answers a failed lookup with text instead of an error object."""
    await session.send_realtime_input(text=QUESTION)
    calls = (await tool_call(session)).function_calls or []
    failed = types.FunctionResponse(
        id=calls[0].id,
        name=calls[0].name,
        response={"value": "The function get_weather failed and returned no result."},
    )
    await session.send_tool_response(function_responses=[failed, *map(answer, calls[1:])])
    await until_turn_complete(session)


async def crash_close(session: live.AsyncSession) -> None:
    """Crashes (1011) while the calls are pending."""
    await session.send_realtime_input(text=QUESTION)
    await tool_call(session)
    await session._ws.close(1011, "handler crashed")


async def drop(session: live.AsyncSession) -> None:
    """Loses the connection (no close frame) while the calls are pending."""
    await session.send_realtime_input(text=QUESTION)
    await tool_call(session)
    session._ws.transport.abort()


@pytest.mark.parametrize(
    ("client", "expected"),
    [
        (serial_loop, [("split_batch", "warning"), ("serial_answers", "warning")]),
        (gather_held_by_timeout, [("held_answers", "warning")]),
        (string_error, [("opaque_error", "warning")]),
        (crash_close, [("client_crash", "error"), *[("unanswered", "error")] * 3]),
        (drop, [("client_crash", "error"), *[("unanswered", "error")] * 3]),
    ],
)
async def test_each_check_fires_on_a_faulty_sdk_client(
    client: FaultyClient, expected: list[tuple[str, str]]
) -> None:
    async with Emulator(held_answers=HELD_AFTER) as emu:
        try:
            async with emu.client().aio.live.connect(
                model=MODEL, config=weather_config()
            ) as session:
                await client(session)
        except Exception:
            assert client in (crash_close, drop)
        await emu.settled()
        assert [(v.kind, v.severity) for v in emu.violations] == expected
    if client is crash_close:
        assert {"close": {"code": 1011, "reason": "handler crashed"}} in [
            e.message for e in emu.transcript
        ]


async def test_live_session_is_silent_in_the_same_conversation() -> None:
    """Concurrent lookups, a stuck one timed out early, a failure as an error object."""
    tools = livebridge.ToolRegistry()

    # Four lookups long: a loaded machine must not time out the lookups that answer,
    # and Pune's timeout still lands well inside HELD_AFTER.
    @tools.tool(timeout=0.6)
    async def get_weather(city: str) -> dict[str, str]:
        """Weather for a city."""
        if city == "Pune":
            await asyncio.Event().wait()
        if city == "Lima":
            raise livebridge.ToolError("the Lima feed is down")
        await asyncio.sleep(LOOKUP_SECONDS)
        return {"city": city, "sky": "sunny"}

    def turn_complete(event: SessionEvent) -> bool:
        return isinstance(event, TurnComplete)

    async with Emulator(held_answers=HELD_AFTER) as emu:
        async with open_session(emu, tools) as session:
            await session.send_text(QUESTION)
            events = await collect_until(session, turn_complete)
        assert emu.violations == []
    outcomes = sorted(e.ending for e in events if isinstance(e, ToolCallSettled))
    assert outcomes == ["error", "ok", "timeout"]


async def test_the_emulators_own_stop_is_the_servers_close() -> None:
    emu = Emulator()
    await emu.start()
    try:
        async with emu.client().aio.live.connect(model=MODEL, config=weather_config()) as session:
            await session.send_realtime_input(text="weather in Cairo")
            await tool_call(session)
            await emu.stop()
            with pytest.raises(errors.APIError) as closed:
                while True:
                    await next_message(session)
            assert closed.value.code == 1001
    finally:
        await emu.stop()
    assert [(v.kind, v.severity) for v in emu.violations] == [("unanswered", "warning")]
    assert "before the server closed" in emu.violations[0].message
