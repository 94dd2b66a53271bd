"""The emulator's GPT-Live side names each peer fault of ``GPT_LIVE.md`` §7 as a verdict, seen
on a raw client (the unmodified ``openai`` SDK's ``client.live.connect()``) that makes it, and
refuses it exactly as the service does."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from livebridge.emulator import Emulator, LiveOptions, LiveServerSession
from tests.support.gpt_live_sessions import MODEL, live_client

TOOL = {"type": "function", "name": "lookup", "parameters": {"type": "object"}}
SESSION: dict[str, Any] = {
    "model": MODEL,
    "delegation": {"type": "responses", "responses": {"model": "gpt-5.6-luna", "tools": [TOOL]}},
}


async def started(live: LiveServerSession) -> None:
    await live.wait_until(lambda: live.started)


@asynccontextmanager
async def raw(emu: Emulator, session: dict[str, Any] | None = None) -> AsyncIterator[Any]:
    """A started session on the SDK's own connection."""
    async with live_client(emu).live.connect() as conn:
        await conn.send_raw(json.dumps({"type": "session.start", "session": session or SESSION}))
        assert (await until(conn, "session.started"))["type"] == "session.started"
        yield conn


async def until(conn: Any, kind: str, *, nested: str | None = None) -> dict[str, Any]:
    while True:
        event = json.loads(await conn.recv_bytes())
        if event["type"] in (kind, "error") and (
            nested is None or (event.get("event") or {}).get("type") == nested
        ):
            return dict(event)


async def calls(conn: Any, count: int) -> list[str]:
    found: list[str] = []
    while len(found) < count:
        event = await until(conn, "response.event", nested="response.output_item.done")
        item = event["event"]["item"]
        if item["type"] == "function_call":
            found.append(item["call_id"])
    return found


def output(call_id: str, text: str = '{"output":1}') -> str:
    item = {"type": "function_call_output", "call_id": call_id, "output": text}
    return json.dumps({"type": "response.item.create", "item": item})


def cases(live: LiveServerSession) -> list[str]:
    return [verdict.case for verdict in live.verdicts]


async def test_t1_t2_an_early_continuation_is_refused_and_named() -> None:
    async def scenario(live: LiveServerSession) -> None:
        await started(live)
        await live.delegate([("lookup", {"q": "plan"}), ("lookup", {"q": "prefs"})])

    async with Emulator(scenario, model=MODEL) as emu, raw(emu) as conn:
        first, second = await calls(conn, 2)
        await conn.send_raw(output(second))  # the fast one, then a create per result
        await conn.send_raw(json.dumps({"type": "response.create", "event_id": "evt_c13"}))
        refusal = await until(conn, "error")
        assert refusal["error"]["code"] == "function_call_outputs_required"
        assert refusal["error"]["client_event_id"] == "evt_c13"
        assert first in refusal["error"]["message"]
        await conn.send_raw(output(first))
        await conn.send_raw(json.dumps({"type": "response.create"}))
        await until(conn, "response.event", nested="response.completed")
        await conn.send_raw(json.dumps({"type": "response.create"}))  # nothing new since
        await until(conn, "response.event", nested="response.completed")
        assert emu.live is not None
        live = emu.live.sessions[0]
        await emu.wait_for(lambda: len(live.verdicts) >= 2)
        assert cases(live) == ["T1", "T2"]


async def test_t4_an_output_for_a_failed_responses_call_is_refused() -> None:
    async def scenario(live: LiveServerSession) -> None:
        await started(live)
        await live.delegate([("lookup", {"q": "x"})], end="failed")

    async with Emulator(scenario, model=MODEL) as emu:
        assert emu.live is not None
        emu.live.options = LiveOptions(proof=False)  # this client surely reads the failure
        async with raw(emu) as conn:
            [call] = await calls(conn, 1)
            failed = await until(conn, "response.event", nested="response.failed")
            assert failed["event"]["response"]["output"] == []
            await conn.send_raw(output(call))
            assert (await until(conn, "error"))["error"]["code"] == "function_call_not_found"
            assert emu.live is not None
            assert cases(emu.live.sessions[0]) == ["T4"]


async def test_t6_an_oversized_output_is_refused_and_its_call_stays_open() -> None:
    async def scenario(live: LiveServerSession) -> None:
        await started(live)
        await live.delegate([("lookup", {"q": "x"})])

    async with Emulator(scenario, model=MODEL) as emu, raw(emu) as conn:
        [call] = await calls(conn, 1)
        await conn.send_raw(output(call, "x" * 41_084))
        assert (await until(conn, "error"))["error"]["code"] == "response_input_buffer_full"
        await conn.send_raw(json.dumps({"type": "response.create"}))
        assert (await until(conn, "error"))["error"]["code"] == "function_call_outputs_required"
        assert emu.live is not None
        assert cases(emu.live.sessions[0]) == ["T6", "T1"]


async def test_t8_a_field_the_strict_schema_refuses_ends_the_start() -> None:
    async with Emulator(model=MODEL) as emu, live_client(emu).live.connect() as conn:
        wrong = {**SESSION, "parallel_tool_calls": True}  # belongs in delegation.responses
        await conn.send_raw(json.dumps({"type": "session.start", "session": wrong}))
        error = await until(conn, "session.started")
        assert error["error"]["code"] == "unknown_parameter"
        assert error["error"]["param"] == "session.parallel_tool_calls"
        assert emu.live is not None
        assert cases(emu.live.sessions[0]) == ["T8"]


async def test_t10_t11_t12_t13_alpha_events_duplicates_strangers_and_late_commands() -> None:
    async def scenario(live: LiveServerSession) -> None:
        await started(live)
        await live.delegate([("lookup", {"q": "x"})])

    emulator = Emulator(scenario, model=MODEL)
    assert emulator.live is not None
    emulator.live.options = LiveOptions(duplicate="error")
    async with emulator as emu, raw(emu) as conn:
        [call] = await calls(conn, 1)
        alpha = {"type": "delegation.function_call_output.create", "call_id": call}
        await conn.send_raw(json.dumps(alpha))
        listed = await until(conn, "error")
        assert "response.item.create" in listed["error"]["message"]
        await conn.send_raw(output(call))
        await conn.send_raw(output(call))
        assert (await until(conn, "error"))["error"]["code"] == "duplicate_function_call_output"
        await conn.send_raw(output("call_from_another_session"))
        assert (await until(conn, "error"))["error"]["param"] == "item.call_id"
        await conn.send_raw(json.dumps({"type": "session.close"}))
        closed = await until(conn, "session.closed")
        assert closed["reason"] == "close_requested"
    live = emulator.live.sessions[0]
    assert cases(live) == ["T10", "T11", "T12"]


async def test_t8_appends_without_their_fields_or_for_no_client_delegation() -> None:
    """MemberJunction's shapes: an append with ``instructions`` instead of ``content``, and one
    naming a delegation id the session never gave."""
    async with Emulator(model=MODEL) as emu, raw(emu, {"model": MODEL}) as conn:
        wrong = {"type": "session.instructions.append", "instructions": "Be brief."}
        await conn.send_raw(json.dumps(wrong))
        assert (await until(conn, "error"))["error"]["param"] == "content"
        phantom = {
            "type": "session.commentary.append",
            "delegation_id": "backend_delegation_1",
            "content": "Done.",
        }
        await conn.send_raw(json.dumps(phantom))
        assert (await until(conn, "error"))["error"]["param"] == "delegation_id"
        assert emu.live is not None
        assert cases(emu.live.sessions[0]) == ["T8", "T8"]


async def test_t7_the_watchdog_names_a_call_whose_output_never_reached_the_wire() -> None:
    """T7 (variant a): a client answers one of two parallel calls and drops the other's output
    on the floor; past ``LiveOptions.watchdog`` the open call is the verdict, the answered one
    is not."""

    async def scenario(live: LiveServerSession) -> None:
        await started(live)
        await live.delegate([("lookup", {"q": "plan"}), ("lookup", {"q": "prefs"})])

    emulator = Emulator(scenario, model=MODEL)
    assert emulator.live is not None
    emulator.live.options = LiveOptions(watchdog=2.0)
    async with emulator as emu, raw(emu) as conn:
        answered, dropped = await calls(conn, 2)
        await conn.send_raw(output(answered))
        live = emu.live.sessions[0] if emu.live else None
        assert live is not None
        await emu.wait_for(lambda: bool(live.verdicts), timeout=20)
    (verdict,) = live.verdicts
    assert verdict.case == "T7"
    assert dropped in verdict.detail and answered not in verdict.detail
