"""``differences``: where two answers' values differ, at random and on the cases that matter."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from livebridge.recording.report import differences

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4)
    ),
    max_leaves=20,
)


def _bools(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [f"{k}:{b}" for k in sorted(value) for b in _bools(value[k])]
    if isinstance(value, list):
        return [f"{i}:{b}" for i, v in enumerate(value) for b in _bools(v)]
    return [repr(value)] if isinstance(value, bool) else []


@given(json_values)
def test_a_value_does_not_differ_from_itself(value: Any) -> None:
    assert list(differences(value, json.loads(json.dumps(value)))) == []


@given(json_values, json_values)
def test_two_values_differ_exactly_when_their_json_does(a: Any, b: Any) -> None:
    found = list(differences(a, b))
    if a == b and _bools(a) == _bools(b):
        assert found == []
    else:
        assert found, (a, b)


def test_each_difference_names_its_field_and_both_values() -> None:
    recorded = {"output": {"city": "Paris", "slots": [1, 2], "ok": True, "gone": 1}}
    replayed = {"output": {"city": "WRONG", "slots": [1, 3], "ok": 1, "new": None}}
    assert list(differences(recorded, replayed)) == [
        'output.city: recorded "Paris", replayed "WRONG"',
        "output.slots.1: recorded 2, replayed 3",
        "output.ok: recorded true, replayed 1",
        "output.gone: recorded 1, missing now",
        "output.new: not recorded, replayed null",
    ]
    assert list(differences([1], [1, 2])) == ["the answer: recorded 1 items, replayed 2"]
    assert next(iter(differences("a" * 100, "b"))).startswith('the answer: recorded "aaaa')


def test_a_name_is_ignored_at_any_depth_and_a_path_only_there() -> None:
    recorded = {"at": 1, "booking": {"at": 2, "id": "x"}, "slots": [{"at": 3}]}
    replayed = {"at": 9, "booking": {"at": 9, "id": "y"}, "slots": [{"at": 9}]}
    assert list(differences(recorded, replayed, {"at", "id"})) == []
    assert list(differences(recorded, replayed, {"booking.id", "at"})) == []
    assert list(differences(recorded, replayed, {"booking.at", "booking.id", "slots.0"})) == [
        "at: recorded 1, replayed 9"
    ]
