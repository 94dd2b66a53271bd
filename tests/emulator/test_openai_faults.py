"""Bad server input and faults over OpenAI Realtime, and JSON steps played on this protocol."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.realtime import ResponseOutputItemDoneEvent
from websockets.exceptions import ConnectionClosedError

from livebridge.cli.emulator import parse_faults
from livebridge.emulator import Conversation, Emulator, Faults, scenario_from_steps
from livebridge.errors import ScenarioError
from tests.support.realtime_clients import (
    MODEL,
    ask,
    calls,
    configure,
    done,
    kinds,
    response,
    until,
)


async def test_bad_server_input_reaches_the_client_as_given() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.send({"type": "response.future_event", "detail": 1})
        await conv.send_raw(b"{not json")
        await conv.tool_call_raw("get_weather", "{city: Oslo", call_id="call_bad")
        await conv.wait_answers(["call_bad"])
        await conv.say("Sorry.")
        await conv.turn_complete()

    async with Emulator(scenario, protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await ask(conn, "Weather in Oslo?")
            await until(conn, "response.created")
            unknown = await conn.recv()
            assert unknown.type == "response.future_event"
            with pytest.raises(json.JSONDecodeError):
                await conn.recv()
            events = await response(conn)
            (call,) = calls(events)
            assert (call.call_id, call.arguments) == ("call_bad", "{city: Oslo")
            error = json.dumps({"error": {"type": "invalid_arguments", "message": "not JSON"}})
            await conn.conversation.item.create(
                item={"type": "function_call_output", "call_id": "call_bad", "output": error}
            )
            await conn.response.create()
            assert done(await response(conn)).response.status == "completed"
        assert kinds(emu) == []
        record = emu.realtime_sessions[0].checker.calls["call_bad"]
        assert record.args == {}
        assert record.answer is not None
        assert record.answer.response == {
            "error": {"type": "invalid_arguments", "message": "not JSON"}
        }


async def test_the_connection_cut_after_a_call_leaves_it_unanswered_by_no_fault() -> None:
    faults = Faults(abort_after_tool_call=True)
    async with Emulator(protocol="openai", faults=faults) as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await ask(conn, "Weather in Oslo?")
            item = await until(conn, "response.output_item.done")
            assert isinstance(item, ResponseOutputItemDoneEvent)
            with pytest.raises(ConnectionClosedError) as closed:
                await until(conn, "response.done")
        assert closed.value.rcvd is None  # no close frame: 1006
        await emu.settled()
        assert kinds(emu) == [("unanswered_call", "warning")]


async def test_dropped_server_events_are_marked_in_the_transcript() -> None:
    faults = parse_faults("drop=conversation.item.added")
    async with Emulator(protocol="openai", faults=faults) as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await ask(conn, "Hello")
            kinds_seen = [e.type for e in await response(conn)]
            assert "conversation.item.added" not in kinds_seen
            assert "conversation.item.done" in kinds_seen
        dropped = [e for e in emu.transcript if e.message.get("dropped")]
        assert dropped and all(e.message["type"] == "conversation.item.added" for e in dropped)


async def test_steps_play_on_openai_where_cancel_ends_the_response_cancelled() -> None:
    steps: list[dict[str, Any]] = [
        {"expect_turn": {}},
        {"say": "Checking."},
        {"tool_call": [["get_weather", {"city": "Oslo"}], {"name": "get_weather", "id": "c-2"}]},
        {"sleep": 0.05},
        {"cancel": {}},
        {"expect_turn": {}},
        {"send": {"type": "rate_limits.updated", "rate_limits": []}},
        {"tool_call_raw": {"name": "get_weather", "arguments": "[", "id": "c-3"}},
        {"wait_answers": {"timeout": 5}},
        {"turn_complete": {}},
    ]
    scenario = scenario_from_steps(steps, "openai")
    async with Emulator(scenario, protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await ask(conn, "Oslo?")
            first = await response(conn)
            assert done(first).response.status == "cancelled"
            assert [c.call_id for c in calls(first)][1] == "c-2"
            await ask(conn, "And now?")
            await until(conn, "rate_limits.updated")
            (raw,) = calls(await response(conn))
            assert raw.arguments == "["
            await conn.conversation.item.create(
                item={"type": "function_call_output", "call_id": "c-3", "output": "{}"}
            )
            await conn.response.create()
            await until(conn, "response.created")
        assert kinds(emu) == []


def test_steps_of_the_other_protocol_are_refused_when_loaded() -> None:
    with pytest.raises(ScenarioError, match="'resumption_update' is not a step of the openai"):
        scenario_from_steps([{"resumption_update": True}], "openai")
    with pytest.raises(ScenarioError, match="'tool_call_raw' is not a step of the gemini"):
        scenario_from_steps([{"tool_call_raw": {"name": "f", "arguments": "{"}}])


async def test_a_gemini_only_step_fails_the_connection_with_a_clear_error() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.go_away("1s")

    async with Emulator(scenario, protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await ask(conn, "Hello")
            with pytest.raises(ConnectionClosedError) as closed:
                await until(conn, "never")
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011
        assert emu.realtime_sessions[0].errors == [
            "ScenarioError: go_away is Gemini Live only; OpenAI Realtime has no such thing"
        ]


async def test_conv_session_on_openai_says_what_to_use_instead() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.wait_until(lambda: True, 1)
        assert conv.protocol == "openai" and conv.realtime.model == MODEL
        conv.session.setup  # noqa: B018 (the access is the test)

    async with Emulator(scenario, protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await ask(conn, "Hello")
            with pytest.raises(ConnectionClosedError):
                await until(conn, "never")
        (error,) = emu.realtime_sessions[0].errors
        assert error.startswith("ScenarioError: conv.session is the Gemini Live connection; ")
        assert "use conv.realtime" in error
