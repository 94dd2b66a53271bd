"""The OpenAI emulator's verdicts where a client is right or wrong only in how it times or
shapes its events: serial execution, out-of-band responses, a missing continuation however the
connection ends, responses with nothing new, and a transcript of what was sent."""

from __future__ import annotations

import asyncio

from openai.resources.realtime.realtime import AsyncRealtimeConnection
from openai.types.realtime import ResponseCreatedEvent, ResponseDoneEvent

from livebridge.emulator import Emulator
from tests.support.realtime_clients import (
    MODEL,
    THREE_CITIES,
    answer,
    ask,
    calls,
    configure,
    done,
    kinds,
    of_kind,
    response,
    until,
)
from tests.support.timing import seconds


async def one_call_answered(conn: AsyncRealtimeConnection) -> None:
    """Configure, ask for Oslo's weather, answer its one call (no ``response.create``)."""
    await configure(conn)
    await ask(conn, "Weather in Oslo?")
    (call,) = calls(await response(conn))
    await answer(conn, call)


#: How long the serial client's "handler" works on each call (the work, not a wait for order).
WORK_SECONDS = 0.12


async def test_calls_run_one_after_another_are_serial_answers() -> None:
    async with Emulator(protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await ask(conn, THREE_CITIES)
            for call in calls(await response(conn)):  # one call at a time, each awaited
                await asyncio.sleep(WORK_SECONDS)
                await answer(conn, call)
            await conn.response.create()
            await response(conn)
        assert kinds(emu) == [("serial_answers", "warning")]
        assert "run them concurrently" in of_kind(emu, "serial_answers")[0].message


async def test_calls_run_together_are_not_serial_and_late_ones_are_held() -> None:
    async with Emulator(protocol="openai", held_answers=WORK_SECONDS / 2) as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await ask(conn, THREE_CITIES)
            issued = calls(await response(conn))
            await asyncio.sleep(WORK_SECONDS)  # the three run at once, for as long as one
            for call in issued:
                await answer(conn, call)
            await conn.response.create()
            await response(conn)
        assert kinds(emu) == [("held_answers", "warning")]


async def test_an_out_of_band_response_is_no_continuation() -> None:
    async with Emulator(protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await one_call_answered(conn)
            await conn.response.create(
                response={"conversation": "none", "metadata": {"purpose": "classify"}}
            )
            side = await response(conn)
            finished = done(side).response
            assert finished.status == "completed" and finished.conversation_id is None
            assert finished.metadata == {"purpose": "classify"}
            await conn.response.create()  # the batch's one continuation
            assert done(await response(conn)).response.status == "completed"
        assert kinds(emu) == []


async def test_a_response_carries_the_metadata_its_create_gave() -> None:
    """Clients match a ``response.created`` to their ``response.create`` by its metadata
    (LiveKit Agents waits for its ``client_event_id``)."""
    async with Emulator(protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await one_call_answered(conn)
            await conn.response.create(response={"metadata": {"client_event_id": "e1"}})
            created = await until(conn, "response.created")
            assert isinstance(created, ResponseCreatedEvent)
            assert created.response.metadata == {"client_event_id": "e1"}
            assert done(await response(conn)).response.metadata == {"client_event_id": "e1"}
        assert kinds(emu) == []


async def test_an_out_of_band_response_runs_beside_the_one_in_progress() -> None:
    async with Emulator(protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await ask(conn, "Weather in Oslo?")
            first = await until(conn, "response.created")
            assert isinstance(first, ResponseCreatedEvent)
            await conn.response.create(response={"conversation": "none"})  # not refused
            events = await response(conn)
            events += await response(conn)
            finished = {
                e.response.id: e.response for e in events if isinstance(e, ResponseDoneEvent)
            }
            assert first.response.id in finished  # and the other one, out of band:
            (side,) = [r for i, r in finished.items() if i != first.response.id]
            assert side.conversation_id is None and side.status == "completed"
            (call,) = calls(events)
            await answer(conn, call)
            await conn.response.create()
            await response(conn)
        assert kinds(emu) == []


async def test_a_missing_continuation_is_an_error_when_the_emulator_stops_first() -> None:
    emu = Emulator(protocol="openai")
    await emu.start()
    try:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await one_call_answered(conn)  # and no response.create: the model never goes on
            await until(conn, "conversation.item.done")
            checker = emu.realtime_sessions[0].checker
            await emu.wait_for(lambda: bool(checker.awaiting_continuation()))
            await emu.stop()  # the emulator stops first, the client still connected
    finally:
        await emu.stop()
    assert kinds(emu) == [("missing_response_create", "error")]


async def test_a_create_with_nothing_new_gets_a_response_that_finishes() -> None:
    async with Emulator(protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await one_call_answered(conn)
            await conn.response.create()
            await response(conn)
            await conn.response.create()  # nothing new since the continuation
            async with asyncio.timeout(seconds(10)):
                again = await response(conn)
            assert done(again).response.status == "completed"
        assert kinds(emu) == [("extra_response_create", "error")]


async def test_the_transcript_holds_each_event_as_it_was_sent() -> None:
    async with (
        Emulator(protocol="openai") as emu,
        emu.openai_client().realtime.connect(model=MODEL) as conn,
    ):
        await configure(conn)
        await ask(conn, THREE_CITIES)
        for call in calls(await response(conn)):
            await answer(conn, call)
        await conn.response.create()
        await response(conn)
    sent = [e.message for e in emu.transcript if e.direction == "server"]
    created = [m["response"] for m in sent if m["type"] == "response.created"]
    assert [(r["status"], r["output"]) for r in created] == [("in_progress", [])] * 2
    added = [m["item"] for m in sent if m["type"] == "response.output_item.added"]
    assert {item["status"] for item in added} == {"in_progress"}
    assert all(item.get("arguments", "") == "" for item in added if item["type"] == "function_call")
