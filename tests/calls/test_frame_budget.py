"""Frame filling on its own: sizes measured in one encode, units taken whole or cut to fit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from livebridge.calls import frame_budget, payloads
from livebridge.calls.call import Outcome

Item = tuple[str | None, Outcome]  # (the unit it belongs to, the answer)


def encode(items: Sequence[Item]) -> list[dict[str, Any]]:
    return [{"id": a.call_id, "name": a.name, "response": a.response} for _, a in items]


def item(unit: str | None, call_id: str, output: str) -> Item:
    return unit, Outcome(call_id, "f", "ok", {"output": output})


def rejection(unit: str | None, call_id: str) -> Item:
    error = payloads.error("fanout_limit", "Only the first 16 calls of a turn run.", retryable=True)
    return unit, Outcome(call_id, "f", "rejected", error)


def test_joined_size_is_each_response_and_its_comma() -> None:
    responses: list[dict[str, Any]] = [{"output": "é" * 3}, {"error": {"type": "x"}}, {}]
    assert frame_budget.joined_size(responses) == sum(
        payloads.encoded_size(r) + 1 for r in responses
    )
    assert frame_budget.joined_size([]) == 0


def test_take_keeps_units_whole_and_stops_at_the_first_that_does_not_fit() -> None:
    items = [item(None, "n", "x" * 100), item("b", "b1", "y" * 100), item("b", "b2", "z" * 100)]
    budget = frame_budget.joined_size(encode(items)) - 1
    taken, responses, split = frame_budget.take(items, lambda unit: unit, encode, budget)
    assert not split
    assert taken == items[:1]  # the batch waits whole for the next frame
    assert responses == encode(items[:1])


def test_take_cuts_a_first_unit_too_large_alone() -> None:
    items = [item("b", "b1", "y" * 5000), item("b", "b2", "z" * 10), item(None, "n", "x")]
    taken, responses, split = frame_budget.take(items, lambda unit: unit, encode, 2000)
    assert not split
    assert [a.call_id for _, a in taken] == ["b1", "b2"]
    assert frame_budget.joined_size(responses) <= 2000
    assert taken[0][1].truncated and taken[1][1] is items[1][1]  # only the large one is cut
    assert responses == encode(taken)


@given(
    outputs=st.lists(st.integers(0, 3000), min_size=1, max_size=60),
    rejections=st.integers(0, 200),
    budget=st.integers(4000, 20_000),
)
def test_a_unit_larger_than_a_frame_even_cut_goes_out_whole_in_order_over_several(
    outputs: list[int], rejections: int, budget: int
) -> None:
    """Errors count like any answer: however many, no frame exceeds its budget, and each
    answer goes out exactly once, in order, untouched once the unit is split."""
    items = [item("b", f"o{i}", "x" * size) for i, size in enumerate(outputs)]
    items += [rejection("b", f"r{i}") for i in range(rejections)]
    sent: list[Item] = []
    unit_of: Any = lambda unit: unit  # noqa: E731
    split = False
    while len(sent) < len(items):
        taken, responses, split_now = frame_budget.take(items[len(sent) :], unit_of, encode, budget)
        assert taken and frame_budget.joined_size(responses) <= budget
        assert responses == encode(taken)
        if split_now:
            split, unit_of = True, lambda unit: None
        sent += taken
    assert [a.call_id for _, a in sent] == [a.call_id for _, a in items]
    if split:
        assert all(a is b for (_, a), (_, b) in zip(sent, items, strict=True))
    else:
        assert frame_budget.joined_size(encode(sent)) <= budget  # one frame, cut to fit


def test_many_rejections_are_split_across_frames() -> None:
    items = [rejection("b", f"r{i}") for i in range(100)]
    taken, responses, split = frame_budget.take(items, lambda unit: unit, encode, 2000)
    assert split and 0 < len(taken) < 100
    assert frame_budget.joined_size(responses) <= 2000
    assert frame_budget.joined_size(encode(items[: len(taken) + 1])) > 2000  # as many as fit
