"""The OpenAI Realtime contract checker on its own: event sequences in, violations out (no I/O)."""

from __future__ import annotations

from typing import Any

import pytest

from livebridge.emulator import Violation
from livebridge.emulator.openai.checker import REALTIME_SEVERITIES, RealtimeChecker, answer_payload
from livebridge.errors import LocalProtocolError

#: One step: ("issue", response, [call ids]) | ("done", response, status) (read by the client)
#: | ("unread", response, status) (its response.done crossed the close) | ("output", call id)
#: | ("create", fresh_input, crossing_server) | ("auto",) | ("end", ending)
Step = tuple[Any, ...]


def run(steps: list[Step]) -> list[tuple[str, str]]:
    found: list[Violation] = []
    checker = RealtimeChecker("s1", found.append)
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
            case ("create", fresh, crossing):
                checker.on_response_create({}, fresh_input=fresh, crossing_server=crossing)
            case ("auto",):
                assert checker.server_started()
            case ("end", ending):
                checker.finish(ending)
    return [(v.kind, v.severity) for v in found]


BATCH = [("issue", "r1", ["a", "b"]), ("done", "r1", "completed")]
ANSWERED = [*BATCH, ("output", "a"), ("output", "b")]
CLOSE: Step = ("end", "client_close")

CASES: dict[str, tuple[list[Step], list[tuple[str, str]]]] = {
    "one output each, one create": ([*ANSWERED, ("create", False, False), CLOSE], []),
    "a call left unanswered": ([*BATCH, ("output", "a"), CLOSE], [("unanswered_call", "error")]),
    "unanswered when the server closed": (
        [*BATCH, ("end", "server_close")],
        [("unanswered_call", "warning")] * 2,
    ),
    "unanswered, its response.done crossing the close": (
        [("issue", "r1", ["a"]), ("unread", "r1", "completed"), CLOSE],
        [("unanswered_call", "warning")],
    ),
    "a crash with calls pending": ([*BATCH, ("end", "client_crash")], [("client_crash", "error")]),
    "a second output": (
        [*ANSWERED, ("output", "a"), ("create", False, False), CLOSE],
        [("duplicate_answer", "error")],
    ),
    "an unknown call id": (
        [*ANSWERED, ("output", "zzz"), ("create", False, False), CLOSE],
        [("unknown_call_id", "error")],
    ),
    "create before the last output": (
        [*BATCH, ("output", "a"), ("create", False, False), ("output", "b"), CLOSE],
        [("early_response_create", "error")],
    ),
    "create before response.done": (
        [("issue", "r1", ["a"]), ("create", False, False), ("done", "r1", "completed"), CLOSE],
        [("early_response_create", "error"), ("unanswered_call", "error")],
    ),
    "two creates": (
        [*ANSWERED, ("create", False, False), ("create", False, False), CLOSE],
        [("extra_response_create", "error")],
    ),
    "no create": ([*ANSWERED, CLOSE], [("missing_response_create", "error")]),
    "no create, server closed": (
        [*ANSWERED, ("end", "server_close")],
        [("missing_response_create", "warning")],
    ),
    "the create crossing a server-started response": (
        [*ANSWERED, ("auto",), ("create", False, True), CLOSE],
        [],
    ),
    "the create after a server-started response had already ended": (
        [*ANSWERED, ("auto",), ("create", False, False), CLOSE],
        [("extra_response_create", "warning")],
    ),
    "a second create after the crossing one": (
        [*ANSWERED, ("auto",), ("create", False, True), ("create", False, False), CLOSE],
        [("extra_response_create", "error")],
    ),
    "a new user turn's create after the batch": (
        [*ANSWERED, ("create", True, False), ("create", True, False), CLOSE],
        [],
    ),
    "answered after response.done said cancelled": (
        [("issue", "r1", ["a"]), ("done", "r1", "cancelled"), ("output", "a"), CLOSE],
        [("answered_cancelled_call", "error")],
    ),
    "answered before response.done said incomplete": (
        [("issue", "r1", ["a"]), ("output", "a"), ("done", "r1", "incomplete"), CLOSE],
        [("answered_cancelled_call", "warning")],
    ),
    "a create after a cancelled response": (
        [("issue", "r1", ["a"]), ("done", "r1", "cancelled"), ("create", True, False), CLOSE],
        [],
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
    assert not checker.server_started()  # "a" is unanswered
    checker.on_output({}, "a", "{}")
    assert checker.server_started() and not checker.server_started()  # once per batch


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
