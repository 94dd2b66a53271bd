"""What an attached GPT-Live session reads from its replay (``openai_live.replay``), sans-I/O:
which replayed calls were answered before the attach, and the session's declared tools."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from livebridge.vendors.openai_live import replay, wire


def event(message: dict[str, Any]) -> wire.ServerEvent:
    return wire.decode_server(json.dumps(message))


def created(delegation: str, response: str) -> wire.ServerEvent:
    inner = {"type": "response.created", "response": {"id": response}}
    return event({"type": "response.event", "delegation_id": delegation, "event": inner})


def call(delegation: str, call_id: str) -> wire.ServerEvent:
    item = {"type": "function_call", "status": "completed", "call_id": call_id, "name": "f"}
    inner = {"type": "response.output_item.done", "item": item}
    return event({"type": "response.event", "delegation_id": delegation, "event": inner})


def ended(delegation: str, response: str, how: str) -> wire.ServerEvent:
    inner = {"type": f"response.{how}", "response": {"id": response}}
    return event({"type": "response.event", "delegation_id": delegation, "event": inner})


def test_a_continuation_settles_every_call_before_it() -> None:
    events = [
        created("d1", "r1"),
        call("d1", "c1"),
        created("d2", "r2"),  # a new delegation: not a continuation
        call("d2", "c2"),
        ended("d1", "r1", "completed"),
        ended("d2", "r2", "completed"),
        created("d1", "r3"),  # d1's second response: the gate had opened
        call("d1", "c3"),
    ]
    assert replay.settled_calls(events) == {"c1", "c2"}
    kept = replay.without(events, {"c1", "c2"})
    assert [e.event.item.call_id for e in kept if e.event and e.event.item] == ["c3"]


def test_a_failed_response_drops_only_its_own_calls() -> None:
    events = [
        created("d1", "r1"),
        call("d1", "c1"),
        created("d2", "r2"),
        call("d2", "c2"),
        ended("d2", "r2", "failed"),
    ]
    assert replay.settled_calls(events) == {"c2"}


def test_overlapping_first_responses_settle_nothing() -> None:
    """Without a continuation nothing shows an answer: every call is open (run once here)."""
    events = [created(f"d{n}", f"r{n}") for n in range(3)]
    events += [call(f"d{n}", f"c{n}") for n in range(3)]
    assert replay.settled_calls(events) == set()


@given(st.lists(st.integers(min_value=0, max_value=3), max_size=12))
def test_first_responses_of_new_delegations_never_settle_a_call(order: list[int]) -> None:
    """Whatever the interleaving of calls and first responses of new delegations, no call is
    taken for answered: only a continuation or a failure proves one."""
    events: list[wire.ServerEvent] = []
    for index, kind in enumerate(order):
        if kind == 0:
            events.append(created(f"new{index}", f"r{index}"))
        else:
            events.append(call(f"new{index}", f"c{index}"))
    assert replay.settled_calls(events) == set()


def test_the_declared_tools_are_the_responses_functions() -> None:
    session = wire.decode_server(
        json.dumps(
            {
                "type": "session.started",
                "session": {
                    "id": "live_1",
                    "delegation": {
                        "type": "responses",
                        "responses": {
                            "model": "m",
                            "tools": [
                                {"type": "function", "name": "lookup"},
                                {"type": "web_search"},
                            ],
                        },
                    },
                },
            }
        )
    ).session
    assert replay.declared_tools(session) == {"lookup"}
    client = wire.Session(id="x", delegation=wire.SessionDelegation(type="client"))
    assert replay.declared_tools(client) is None
    assert replay.declared_tools(None) is None
