"""The OpenAI Realtime contract checker on its own: event sequences in, violations out (no I/O)."""

from __future__ import annotations

from typing import Any

import pytest

from livebridge.emulator import Violation
from livebridge.emulator.openai.checker import REALTIME_SEVERITIES, RealtimeChecker, answer_payload
from livebridge.errors import LocalProtocolError

#: One step: ("issue", response, [call ids]) | ("done", response, status) (read by the client)
#: | ("unread", response, status) (its response.done crossed the close) | ("output", call id)
#: | ("create", fresh_input, active) (active: who started the response in progress that
#: refuses it, or None) | ("oob",) (an out-of-band create) | ("auto",) (the server starts a
#: response once every output is in) | ("speech",) (turn detection starts one on user speech)
#: | ("outputs_read", response) (the client answered a ping after its last output)
#: | ("at", seconds) (the checker's clock) | ("end", ending)
Step = tuple[Any, ...]


def run(steps: list[Step]) -> list[tuple[str, str]]:
    found: list[Violation] = []
    now = [0.0]
    checker = RealtimeChecker("s1", found.append, clock=lambda: now[0])
    for step in steps:
        match step:
            case ("issue", response, ids):
                checker.issue(response, [(i, "get_weather", {"city": i}) for i in ids])
            case ("done", response, status):
                checker.end_response(response, status)
                checker.read(response)  # the client answered the ping behind response.done
            case ("unread", response, status):
                checker.end_response(response, status)
            case ("output", call_id):
                checker.on_output({"item": {"call_id": call_id}}, call_id, '{"output": 1}')
            case ("create", fresh, active):
                checker.on_response_create({}, fresh_input=fresh, active=active)
            case ("oob",):
                checker.on_response_create({}, fresh_input=False, out_of_band=True)
            case ("auto",):
                assert checker.due_for_auto_start()
                assert checker.server_started() == "continuation"
            case ("speech",):
                assert checker.server_started(fresh_input=True) == "turn"
            case ("outputs_read", response):
                checker.outputs_read(response)
            case ("at", seconds):
                now[0] = seconds
            case ("end", ending):
                checker.finish(ending)
    return [(v.kind, v.severity) for v in found]


BATCH = [("issue", "r1", ["a", "b"]), ("done", "r1", "completed")]
ANSWERED = [*BATCH, ("output", "a"), ("output", "b")]
CREATE: Step = ("create", False, None)
CLOSE: Step = ("end", "client_close")
MISSING = ("missing_response_create", "error")

CASES: dict[str, tuple[list[Step], list[tuple[str, str]]]] = {
    "one output each, one create": ([*ANSWERED, CREATE, CLOSE], []),
    "a call left unanswered": ([*BATCH, ("output", "a"), CLOSE], [("unanswered_call", "error")]),
    "unanswered when the server closed": (
        [*BATCH, ("end", "server_close")],
        [("unanswered_call", "warning")] * 2,
    ),
    "unanswered, its response.done crossing the close": (
        [("issue", "r1", ["a"]), ("unread", "r1", "completed"), CLOSE],
        [("unanswered_call", "warning")],
    ),
    "a crash with calls pending": (
        [*BATCH, ("end", "client_crash")],
        [("client_crash", "error"), *[("unanswered_call", "error")] * 2],
    ),
    "a second output": (
        [*ANSWERED, ("output", "a"), CREATE, CLOSE],
        [("duplicate_answer", "error")],
    ),
    "an unknown call id": (
        [*ANSWERED, ("output", "zzz"), CREATE, CLOSE],
        [("unknown_call_id", "error")],
    ),
    "create before the last output continues nothing": (
        [*BATCH, ("output", "a"), CREATE, ("output", "b"), CLOSE],
        [("early_response_create", "error"), MISSING],
    ),
    "an early create, then the continuation": (
        [*BATCH, ("output", "a"), CREATE, ("output", "b"), CREATE, CLOSE],
        [("early_response_create", "error")],
    ),
    "create while the calls' response is in progress": (
        [("issue", "r1", ["a"]), ("create", False, "client"), ("done", "r1", "completed"), CLOSE],
        [("early_response_create", "error"), ("unanswered_call", "error")],
    ),
    "two creates": (
        [*ANSWERED, CREATE, CREATE, CLOSE],
        [("extra_response_create", "error")],
    ),
    "no create": ([*ANSWERED, CLOSE], [MISSING]),
    "no create, server closed before the client could read the last output": (
        [*ANSWERED, ("end", "server_close")],
        [("missing_response_create", "warning")],
    ),
    "no create, server closed after the client read the last output": (
        [*ANSWERED, ("outputs_read", "r1"), ("end", "server_close")],
        [MISSING],
    ),
    "the create crossing a server-started response": (
        [*ANSWERED, ("auto",), ("create", False, "server"), CLOSE],
        [],
    ),
    "the create after a server-started response had already ended": (
        [*ANSWERED, ("auto",), CREATE, CLOSE],
        [("extra_response_create", "warning")],
    ),
    "a second create after the crossing one": (
        [*ANSWERED, ("auto",), ("create", False, "server"), CREATE, CREATE, CLOSE],
        [("extra_response_create", "warning"), ("extra_response_create", "error")],
    ),
    "speech before the outputs: the refused create is no continuation, the next one is": (
        [*BATCH, ("speech",), *ANSWERED[2:], ("create", False, "server"), CREATE, CLOSE],
        [],
    ),
    "speech before the outputs, then no continuation": (
        [*BATCH, ("speech",), *ANSWERED[2:], ("create", False, "server"), CLOSE],
        [MISSING],
    ),
    "speech after every output continues the batch": ([*ANSWERED, ("speech",), CLOSE], []),
    "a new user turn's create after the batch": (
        [*ANSWERED, ("create", True, None), ("create", True, None), CLOSE],
        [],
    ),
    "an out-of-band create is no continuation": (
        [*ANSWERED, ("oob",), CREATE, CLOSE],
        [],
    ),
    "an out-of-band create alone": ([*ANSWERED, ("oob",), CLOSE], [MISSING]),
    "answered after response.done said cancelled": (
        [("issue", "r1", ["a"]), ("done", "r1", "cancelled"), ("output", "a"), CLOSE],
        [("answered_cancelled_call", "error")],
    ),
    "answered before response.done said incomplete": (
        [("issue", "r1", ["a"]), ("output", "a"), ("done", "r1", "incomplete"), CLOSE],
        [("answered_cancelled_call", "warning")],
    ),
    "a create after a cancelled response": (
        [("issue", "r1", ["a"]), ("done", "r1", "cancelled"), ("create", True, None), CLOSE],
        [],
    ),
    "outputs one after another": (
        [*BATCH, ("at", 0.2), ("output", "a"), ("at", 0.4), ("output", "b"), CREATE, CLOSE],
        [("serial_answers", "warning")],
    ),
    "outputs together": (
        [*BATCH, ("at", 0.2), ("output", "a"), ("output", "b"), CREATE, CLOSE],
        [],
    ),
    "outputs held past the bound": (
        [*BATCH, ("at", 9.0), ("output", "a"), ("output", "b"), CREATE, CLOSE],
        [("held_answers", "warning")],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_rules(name: str) -> None:
    steps, expected = CASES[name]
    assert run(steps) == expected


def test_every_kind_has_a_severity_and_a_case() -> None:
    seen = {kind for _, expected in CASES.values() for kind, _ in expected}
    assert seen | {"invalid_event"} == set(REALTIME_SEVERITIES)


def test_an_id_is_issued_once_and_auto_start_needs_a_complete_batch() -> None:
    checker = RealtimeChecker("s1", lambda violation: None)
    checker.issue("r1", [("a", "f", {})])
    with pytest.raises(LocalProtocolError, match="issued before"):
        checker.issue("r2", [("a", "f", {})])
    checker.end_response("r1", "completed")
    assert not checker.due_for_auto_start()  # "a" is unanswered
    checker.on_output({}, "a", "{}")
    assert checker.due_for_auto_start()
    assert checker.server_started() == "continuation"
    assert not checker.due_for_auto_start()  # once per batch


@pytest.mark.parametrize(
    ("output", "payload"),
    [
        ('{"output": {"sky": "clear"}}', {"output": {"sky": "clear"}}),
        ('{"error": {"type": "timeout"}}', {"error": {"type": "timeout"}}),
        ("[1, 2]", {"output": [1, 2]}),
        ("plain words", {"output": "plain words"}),
    ],
)
def test_an_output_string_reads_as_a_payload(output: str, payload: dict[str, Any]) -> None:
    assert answer_payload(output) == payload
