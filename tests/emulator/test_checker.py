"""The contract checker: every violation is reported with its message; none for a correct client."""

from __future__ import annotations

import json
from typing import Any

import pytest

from livebridge.emulator import SEVERITIES, VIOLATION_KINDS, Conversation, Emulator
from livebridge.emulator.contract import TRANSITIONS, Ending, Thresholds, Violation, move
from livebridge.emulator.gemini import checker
from livebridge.emulator.gemini.checker import Checker
from livebridge.errors import LocalProtocolError
from livebridge.vendors.gemini import wire
from tests.support.gemini_clients import (
    MODEL,
    answer,
    raw_connect,
    recv_until,
    tool_call,
    until_turn_complete,
    weather_config,
)

SETUP_BLOCKING = {
    "model": f"models/{MODEL}",
    "tools": [
        {
            "functionDeclarations": [
                {"name": "get_weather"},
                {"name": "book", "behavior": "NON_BLOCKING"},
            ]
        }
    ],
}


def calls_then_wait(*names: str) -> Any:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids = await conv.tool_call([(name, {}) for name in names])
        await conv.wait_answers(ids)
        await conv.turn_complete()

    return scenario


async def exchange(emu: Emulator, responses: list[list[dict[str, Any]]], *names: str) -> list[str]:
    """Ask for a turn, then send each list of responses (``{id}`` placeholders: call index)."""
    async with raw_connect(emu, setup=SETUP_BLOCKING) as ws:
        await ws.send(json.dumps({"realtime_input": {"text": "go"}}))
        call = await recv_until(ws, "toolCall")
        ids = [c["id"] for c in call["toolCall"]["functionCalls"]]
        for batch in responses:
            sent = [{**r, "id": ids[r["id"]]} if isinstance(r.get("id"), int) else r for r in batch]
            await ws.send(json.dumps({"tool_response": {"function_responses": sent}}))
        await ws.send(json.dumps({"realtime_input": {"text": "sync"}}))
        await emu.wait_for(lambda: any("sync" in str(e.message) for e in emu.transcript))
    await emu.wait_for(lambda: emu.sessions[0].close_info is not None)
    return ids


def kinds(emu: Emulator) -> list[str]:
    return [v.kind for v in emu.violations]


OK = {"name": "get_weather", "response": {"output": 1}}


@pytest.mark.parametrize(
    ("responses", "expected"),
    [
        ([[{**OK, "id": "function-call-1"}, {**OK, "id": 0}]], ["unknown_id"]),
        ([[{**OK, "id": 0}], [{**OK, "id": 0}]], ["duplicate_answer"]),
        ([[{"name": "get_weather", "response": {}}, {**OK, "id": 0}]], ["missing_id"]),
        ([[{"id": 0, "response": {"output": 1}}]], ["missing_name"]),
        ([[{"id": 0, "name": "other", "response": {}}]], ["name_mismatch"]),
        ([[{**OK, "id": 0, "scheduling": "SILENT"}]], ["scheduling_on_blocking"]),
        ([[{**OK, "id": 0, "will_continue": False}]], ["will_continue_on_blocking"]),
        ([[], []], ["unanswered"]),
    ],
)
async def test_single_call_violations(
    responses: list[list[dict[str, Any]]], expected: list[str]
) -> None:
    async with Emulator(calls_then_wait("get_weather")) as emu:
        await exchange(emu, [r for r in responses if r])
    assert kinds(emu) == expected
    offending = emu.violations[0].offending
    assert (offending is None) == (expected == ["unanswered"])
    assert all(v.session == "s1" for v in emu.violations)


async def test_split_blocking_batch_is_a_warning() -> None:
    async with Emulator(calls_then_wait("get_weather", "get_weather")) as emu:
        await exchange(emu, [[{**OK, "id": 0}], [{**OK, "id": 1}]], "get_weather", "get_weather")
    assert [(v.kind, v.severity) for v in emu.violations] == [("split_batch", "warning")]


async def test_answer_for_cancelled_call() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids = await conv.tool_call([("get_weather", {})])
        await conv.cancel(ids)

    async with Emulator(scenario) as emu, raw_connect(emu, setup=SETUP_BLOCKING) as ws:
        await ws.send(json.dumps({"realtime_input": {"text": "go"}}))
        call = await recv_until(ws, "toolCall")
        await recv_until(ws, "toolCallCancellation")
        call_id = call["toolCall"]["functionCalls"][0]["id"]
        await ws.send(json.dumps({"toolResponse": {"functionResponses": [{**OK, "id": call_id}]}}))
        await emu.wait_for(lambda: bool(emu.violations))
    assert kinds(emu) == ["cancelled_id"]
    assert emu.violations[0].offending == {
        "toolResponse": {"functionResponses": [{**OK, "id": call_id}]}
    }


@pytest.mark.parametrize(
    ("check", "in_flight", "flagged"),
    [(True, 0.0, True), (False, 0.0, False), (True, 60.0, False)],
    ids=["checked", "not-checked", "still-in-flight"],
)
async def test_audio_while_blocking_call_pending(
    check: bool, in_flight: float, flagged: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Audio that arrives within AUDIO_IN_FLIGHT of the client reading the toolCall (its pong) was
    # sent before the app saw it; the window is set to 0 or to a minute so the outcome is certain.
    monkeypatch.setattr(checker, "AUDIO_IN_FLIGHT", in_flight)
    async with (
        Emulator(calls_then_wait("get_weather"), check_audio_during_blocking=check) as emu,
        raw_connect(emu, setup=SETUP_BLOCKING) as ws,
    ):
        await ws.send(json.dumps({"realtime_input": {"text": "go"}}))
        call = await recv_until(ws, "toolCall")
        await emu.wait_for(lambda: all(r.read_at for r in emu.sessions[0].checker.calls.values()))
        silence = {"data": "AAAAAA==", "mime_type": "audio/pcm;rate=16000"}
        for _ in range(3):
            await ws.send(json.dumps({"realtime_input": {"audio": silence}}))
        call_id = call["toolCall"]["functionCalls"][0]["id"]
        await ws.send(json.dumps({"toolResponse": {"functionResponses": [{**OK, "id": call_id}]}}))
        await recv_until(ws, "usageMetadata")
    assert kinds(emu) == (["audio_during_blocking"] if flagged else [])


async def test_deprecated_media_chunks_warning(live_emulator: Emulator) -> None:
    async with raw_connect(live_emulator) as ws:
        chunk = {"data": "AAA=", "mime_type": "audio/pcm;rate=16000"}
        await ws.send(json.dumps({"realtime_input": {"mediaChunks": [chunk]}}))
        await live_emulator.wait_for(lambda: bool(live_emulator.violations))
    assert [(v.kind, v.severity) for v in live_emulator.violations] == [
        ("deprecated_media_chunks", "warning")
    ]


async def test_correct_sdk_client_has_no_violations() -> None:
    """Blocking batch answered at once, NON_BLOCKING streamed, re-issue answered: all clean."""
    async with Emulator(reissue_after=5.0) as emu:
        client = emu.client()
        async with client.aio.live.connect(model=MODEL, config=weather_config()) as session:
            for question in ("weather in Paris and Rome", "and Lisbon?"):
                await session.send_realtime_input(text=question)
                call = await tool_call(session)
                await session.send_tool_response(
                    function_responses=[answer(c) for c in call.function_calls or []]
                )
                await until_turn_complete(session)
        await emu.wait_for(lambda: emu.sessions[0].close_info is not None)
    assert emu.violations == []
    assert len(emu.sessions[0].answered) == 3


def test_every_kind_is_tested() -> None:
    tested = {
        "unknown_id",
        "duplicate_answer",
        "missing_id",
        "missing_name",
        "name_mismatch",
        "scheduling_on_blocking",
        "will_continue_on_blocking",
        "unanswered",
        "split_batch",
        "cancelled_id",
        "audio_during_blocking",
        "deprecated_media_chunks",
        "malformed_message",
        # tests/emulator/test_checks.py and test_service.py
        "serial_answers",
        "held_answers",
        "opaque_error",
        "client_crash",
        "frame_too_large",
        # tests/test_models.py and tests/emulator/test_models.py (the model profiles)
        "undeclared_behavior",
        "unsupported_behavior",
        "unsupported_field",
    }
    assert tested == set(VIOLATION_KINDS) == set(SEVERITIES)


async def test_unanswered_when_client_closes_is_an_error(live_emulator: Emulator) -> None:
    client = live_emulator.client()
    async with client.aio.live.connect(model=MODEL, config=weather_config()) as session:
        await session.send_realtime_input(text="weather in Cairo")
        await tool_call(session)
    await live_emulator.wait_for(lambda: bool(live_emulator.violations))
    assert [(v.kind, v.severity) for v in live_emulator.violations] == [("unanswered", "error")]


# -- the checker without sockets: a clock in hand --------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def offline_checker(**thresholds: Any) -> tuple[Checker, Clock, list[Violation]]:
    clock, found = Clock(), list[Violation]()
    checker_ = Checker("s1", found.append, thresholds=Thresholds(**thresholds), clock=clock)
    return checker_, clock, found


def respond(checker_: Checker, *ids: str, **response: Any) -> None:
    answers = [
        wire.FunctionResponse(id=i, name="f", response=response or {"output": 1}) for i in ids
    ]
    checker_.on_tool_response({"toolResponse": {}}, answers)


@pytest.mark.parametrize(
    ("gaps", "one_message", "expected"),
    [
        ([0.3, 0.3, 0.3], False, ["split_batch", "serial_answers"]),
        ([0.3, 0.01, 0.3], False, ["split_batch"]),  # two finished together: not a loop
        ([0.3], True, []),
    ],
)
def test_serial_answers_need_every_gap_above_the_threshold(
    gaps: list[float], one_message: bool, expected: list[str]
) -> None:
    checker_, clock, found = offline_checker(serial_gap=0.05)
    checker_.issue([(f"c{i}", "f", {}, True) for i in range(3)])
    if one_message:
        clock.now += gaps[0]
        respond(checker_, "c0", "c1", "c2")
    else:
        for i, gap in enumerate(gaps):
            clock.now += gap
            respond(checker_, f"c{i}")
    assert [v.kind for v in found] == expected


@pytest.mark.parametrize(("waited", "flagged"), [(2.9, False), (3.1, True)])
def test_held_answers_threshold(waited: float, flagged: bool) -> None:
    checker_, clock, found = offline_checker(held_answers=3.0)
    checker_.issue([("c0", "f", {}, True), ("c1", "f", {}, True)])
    clock.now = waited
    respond(checker_, "c0", "c1")
    assert [v.kind for v in found] == (["held_answers"] if flagged else [])


@pytest.mark.parametrize(
    ("response", "opaque"),
    [
        ({"error": "boom"}, True),
        ({"value": "The function f failed and returned no result."}, True),
        ({"result": "Error: backend unavailable"}, True),
        ({"error": {"type": "timeout", "message": "slow"}}, False),
        ({"output": "no errors found"}, False),
        ({"value": "sunny"}, False),
    ],
)
def test_opaque_error_payloads(response: dict[str, Any], opaque: bool) -> None:
    checker_, _, found = offline_checker()
    checker_.issue([("c0", "f", {}, True)])
    respond(checker_, "c0", **response)
    assert [v.kind for v in found] == (["opaque_error"] if opaque else [])


@pytest.mark.parametrize(
    ("ending", "read", "expected"),
    [
        ("client_close", True, [("unanswered", "error")] * 2),
        ("client_close", False, [("unanswered", "warning")] * 2),  # crossed the client's close
        ("client_crash", True, [("client_crash", "error"), *[("unanswered", "error")] * 2]),
        ("client_crash", False, [("client_crash", "error"), *[("unanswered", "warning")] * 2]),
        ("server_close", True, [("unanswered", "warning")] * 2),
    ],
)
def test_how_the_connection_ended_decides_the_verdict(
    ending: Ending, read: bool, expected: list[tuple[str, str]]
) -> None:
    checker_, _, found = offline_checker()
    batch = checker_.issue([("c0", "f", {}, True), ("c1", "f", {}, False)])
    if read:
        checker_.read(batch)  # the client answered the ping sent behind the toolCall
    checker_.finish(ending)
    assert [(v.kind, v.severity) for v in found] == expected


def test_a_move_the_table_lacks_raises_and_changes_nothing() -> None:
    checker_, _, _ = offline_checker()
    checker_.issue([("c0", "f", {}, True)])
    checker_.cancel(["c0"])
    record = checker_.calls["c0"]
    assert ("cancelled", "answer") not in TRANSITIONS
    with pytest.raises(LocalProtocolError, match="cannot answer a cancelled call"):
        move(record, "answer")
    assert record.state == "cancelled"
    with pytest.raises(LocalProtocolError, match="issued before"):
        checker_.issue([("c0", "f", {}, True)])


def test_a_late_answer_to_a_withdrawn_call_is_no_fault() -> None:
    checker_, _, found = offline_checker()
    checker_.issue([("c0", "f", {}, True)])
    checker_.withdraw(["c0"])
    respond(checker_, "c0")
    checker_.finish("client_close")
    assert found == []
    assert checker_.calls["c0"].state == "answered"
