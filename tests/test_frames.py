"""Frame filling on its own: sizes measured in one encode, units taken whole or cut to fit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from livebridge import frames, payloads
from livebridge.calls import Outcome

Item = tuple[str | None, Outcome]  # (the unit it belongs to, the answer)


def encode(items: Sequence[Item]) -> list[dict[str, Any]]:
    return [{"id": a.call_id, "name": a.name, "response": a.response} for _, a in items]


def item(unit: str | None, call_id: str, output: str) -> Item:
    return unit, Outcome(call_id, "f", "ok", {"output": output})


def test_joined_size_is_each_response_and_its_comma() -> None:
    responses: list[dict[str, Any]] = [{"output": "é" * 3}, {"error": {"type": "x"}}, {}]
    assert frames.joined_size(responses) == sum(payloads.encoded_size(r) + 1 for r in responses)
    assert frames.joined_size([]) == 0


def test_take_keeps_units_whole_and_stops_at_the_first_that_does_not_fit() -> None:
    items = [item(None, "n", "x" * 100), item("b", "b1", "y" * 100), item("b", "b2", "z" * 100)]
    budget = frames.joined_size(encode(items)) - 1
    taken, responses = frames.take(items, lambda unit: unit, encode, budget)
    assert taken == items[:1]  # the batch waits whole for the next frame
    assert responses == encode(items[:1])


def test_take_cuts_a_first_unit_too_large_alone() -> None:
    items = [item("b", "b1", "y" * 5000), item("b", "b2", "z" * 10), item(None, "n", "x")]
    taken, responses = frames.take(items, lambda unit: unit, encode, 2000)
    assert [a.call_id for _, a in taken] == ["b1", "b2"]
    assert frames.joined_size(responses) <= 2000
    assert taken[0][1].truncated and taken[1][1] is items[1][1]  # only the large one is cut
    assert responses == encode(taken)
