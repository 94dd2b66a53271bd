"""Parallel function calls over OpenAI Realtime, driven by the official ``openai`` SDK, and the
contract checker's verdict on each way a client can answer them."""

from __future__ import annotations

import asyncio

from openai.types.realtime import RealtimeErrorEvent, ResponseOutputItemDoneEvent

from livebridge.emulator import Conversation, Emulator, scenario_from_steps
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


async def test_three_calls_are_one_response_and_one_create_after_all_outputs_is_clean() -> None:
    async with Emulator(protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await ask(conn, THREE_CITIES)
            events = await response(conn)
            issued = calls(events)
            assert [c.name for c in issued] == ["get_weather"] * 3
            assert [c.arguments for c in issued] == [
                '{"city":"Oslo"}',
                '{"city":"Lisbon"}',
                '{"city":"Paris"}',
            ]
            item_done = [e for e in events if isinstance(e, ResponseOutputItemDoneEvent)]
            assert len({e.response_id for e in item_done}) == 1
            finished = done(events).response
            assert finished.status == "completed"
            assert [item.type for item in finished.output or []] == ["function_call"] * 3
            kinds_seen = [e.type for e in events]
            assert kinds_seen.count("response.function_call_arguments.done") == 3
            assert kinds_seen.index("response.function_call_arguments.delta") < kinds_seen.index(
                "response.function_call_arguments.done"
            )
            for call in issued:
                await answer(conn, call)
            await conn.response.create()
            reply = await response(conn)
            assert done(reply).response.status == "completed"
            text = next(e for e in reply if e.type == "response.output_text.done")
            assert "Oslo: city Oslo, sky sunny" in getattr(text, "text", "")
        assert kinds(emu) == []


async def test_two_outputs_of_three_leave_one_call_unanswered() -> None:
    async with Emulator(protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await ask(conn, THREE_CITIES)
            first, second, third = calls(await response(conn))
            await answer(conn, first)
            await answer(conn, second)
            await emu.wait_for(lambda: len(emu.realtime_sessions[0].answered) == 2)
        assert kinds(emu) == [("unanswered_call", "error")]
        assert third.call_id is not None
        assert third.call_id in of_kind(emu, "unanswered_call")[0].message


async def test_a_second_output_for_one_call_is_a_duplicate() -> None:
    async with Emulator(protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await ask(conn, "Weather in Oslo?")
            (call,) = calls(await response(conn))
            await answer(conn, call)
            await answer(conn, call, sky="rain")
            await conn.response.create()
            await response(conn)
        assert kinds(emu) == [("duplicate_answer", "error")]
        offending = of_kind(emu, "duplicate_answer")[0].offending
        assert offending is not None and offending["item"]["call_id"] == call.call_id


async def test_an_early_create_is_answered_at_once_with_what_is_in() -> None:
    """The service answers a ``response.create`` at once with the outputs it has; it does not
    wait for the rest, nor speak results it could not have had."""
    async with Emulator(protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await ask(conn, THREE_CITIES)
            first, second, third = calls(await response(conn))
            await answer(conn, first)
            await conn.response.create()
            async with asyncio.timeout(seconds(10)):
                reply = await response(conn)  # before the other two outputs are sent
            assert done(reply).response.status == "completed"
            text = next(e for e in reply if e.type == "response.output_text.done")
            said = getattr(text, "text", "")
            assert "city Oslo, sky sunny" in said and "still waiting for 2 more" in said
            assert "Lisbon" not in said and "Paris" not in said
            await answer(conn, second)
            await answer(conn, third)
            await emu.wait_for(lambda: not emu.realtime_sessions[0].pending_calls)
        assert kinds(emu) == [
            ("early_response_create", "error"),
            ("missing_response_create", "error"),  # the model never heard Lisbon and Paris
        ]
        assert "missing: " in of_kind(emu, "early_response_create")[0].message


async def test_response_create_while_the_calls_response_is_in_progress_is_early() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.tool_call([("get_weather", {"city": "Oslo"})])
        await conv.expect_turn()  # the response stays open: no response.done yet

    async with Emulator(scenario, protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await ask(conn, "Weather in Oslo?")
            await until(conn, "response.output_item.done")
            await conn.response.create()
            error = await until(conn, "error")
            assert isinstance(error, RealtimeErrorEvent)
            assert error.error.code == "conversation_already_has_active_response"
        assert ("early_response_create", "error") in kinds(emu)


async def test_a_second_response_create_after_one_batch_is_extra() -> None:
    async with Emulator(protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await ask(conn, "Weather in Oslo?")
            (call,) = calls(await response(conn))
            await answer(conn, call)
            await conn.response.create()
            await response(conn)
            await conn.response.create()
            await until(conn, "response.created")
        assert kinds(emu) == [("extra_response_create", "error")]


async def test_every_output_and_no_response_create_is_missing() -> None:
    async with Emulator(protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await ask(conn, "Weather in Oslo?")
            (call,) = calls(await response(conn))
            await answer(conn, call)
            await until(conn, "conversation.item.done")
        assert kinds(emu) == [("missing_response_create", "error")]


async def test_an_output_for_an_unknown_call_id_is_refused_and_reported() -> None:
    async with Emulator(protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await conn.conversation.item.create(
                item={"type": "function_call_output", "call_id": "call_nope", "output": "{}"}
            )
            error = await until(conn, "error")
            assert isinstance(error, RealtimeErrorEvent)
            assert error.error.param == "item.call_id"
            assert "call_nope" in error.error.message
        assert kinds(emu) == [("unknown_call_id", "error")]


async def cancel_after_items(conv: Conversation) -> None:
    """Two calls, then the response is cut before its ``response.done``."""
    await conv.expect_turn()
    ids = await conv.tool_call(
        [("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Rome"})]
    )
    session = conv.realtime
    await session.wait_until(lambda: session.checker.calls[ids[0]].answer is not None, 0.3)
    await conv.cancel(ids)
    await conv.expect_turn()


async def test_calls_of_a_cancelled_response_must_not_be_answered() -> None:
    async def scenario(conv: Conversation) -> None:
        try:
            await cancel_after_items(conv)
        except TimeoutError:  # the client did not answer early: cancel now
            await conv.cancel(list(conv.known_calls))
            await conv.expect_turn()

    async with Emulator(scenario, protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await ask(conn, "Weather in Oslo and Rome?")
            events = await response(conn)
            finished = done(events).response
            assert finished.status == "cancelled"
            assert finished.status_details is not None
            assert finished.status_details.reason == "turn_detected"
            oslo, _ = calls(events)
            await answer(conn, oslo)
            await until(conn, "conversation.item.done")
        assert kinds(emu) == [("answered_cancelled_call", "error")]
        assert not emu.realtime_sessions[0].pending_calls


async def test_an_output_sent_before_response_done_said_cancelled_is_a_warning() -> None:
    async with Emulator(cancel_after_items, protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await ask(conn, "Weather in Oslo and Rome?")
            first = await until(conn, "response.output_item.done")
            assert isinstance(first, ResponseOutputItemDoneEvent)
            assert first.item.type == "function_call"
            await answer(conn, first.item)  # executing before response.done
            assert done(await response(conn)).response.status == "cancelled"
        assert kinds(emu) == [("answered_cancelled_call", "warning")]


async def test_auto_response_turns_the_clients_create_into_a_tolerated_error() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids = await conv.tool_call([("get_weather", {"city": "Oslo"})])
        await conv.wait_answers(ids)
        creates = conv.realtime.shared.transcript
        await conv.wait_until(
            lambda: sum(e.message.get("type") == "response.create" for e in creates) == 2
        )
        await conv.say("Oslo is sunny.")
        await conv.turn_complete()

    async with Emulator(scenario, protocol="openai", auto_response=True) as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await ask(conn, "Weather in Oslo?")
            (call,) = calls(await response(conn))
            await answer(conn, call)
            await until(conn, "response.created")  # the server started it by itself
            await conn.response.create()
            error = await until(conn, "error")
            assert isinstance(error, RealtimeErrorEvent)
            assert error.error.code == "conversation_already_has_active_response"
            assert error.error.type == "invalid_request_error"
            reply = await response(conn)  # the session goes on
            assert done(reply).response.status == "completed"
        assert kinds(emu) == []


async def test_calls_of_an_incomplete_response_are_not_to_be_answered() -> None:
    scenario = scenario_from_steps(
        [
            {"expect_turn": {}},
            {"tool_call": [["get_weather", {"city": "Oslo"}]]},
            {"end_response": {"status": "incomplete", "reason": "max_output_tokens"}},
            {"expect_turn": {}},
        ],
        "openai",
    )
    async with Emulator(scenario, protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await ask(conn, "Weather in Oslo?")
            events = await response(conn)
            finished = done(events).response
            assert finished.status == "incomplete"
            assert finished.status_details is not None
            assert finished.status_details.reason == "max_output_tokens"
            (call,) = calls(events)
            await answer(conn, call)
            await until(conn, "conversation.item.done")
        assert kinds(emu) == [("answered_cancelled_call", "error")]
        assert "ended incomplete" in of_kind(emu, "answered_cancelled_call")[0].message


async def test_a_call_the_client_could_not_act_on_before_closing_is_only_a_warning() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.tool_call([("get_weather", {"city": "Oslo"})])
        await conv.wait_until(lambda: False)  # the response never ends: no response.done

    async with Emulator(scenario, protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await ask(conn, "Weather in Oslo?")
            await until(conn, "response.output_item.done")
        assert kinds(emu) == [("unanswered_call", "warning")]
        assert "crossed the client's close" in emu.violations[0].message
