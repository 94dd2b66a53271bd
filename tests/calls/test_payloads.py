import datetime
from typing import Any

import msgspec
import pytest

from livebridge.calls import payloads
from livebridge.errors import UnserializableResult


def test_small_output_is_plain_json() -> None:
    payload = payloads.output({"when": datetime.date(2024, 5, 1), 3: (1, 2)}, 1000)
    assert payload.response == {"output": {"when": "2024-05-01", "3": (1, 2)}}
    assert payload.result_bytes == len(msgspec.json.encode(payload.response))
    assert not payload.truncated and payload.original_bytes is None


@pytest.mark.parametrize(
    ("value", "expected_type"),
    [("x" * 5000, str), (list(range(3000)), list), ({"rows": ["y" * 100] * 100}, str)],
)
def test_truncation_fits_the_budget(value: Any, expected_type: type[Any]) -> None:
    original = len(msgspec.json.encode({"output": value}))
    payload = payloads.output(value, 512)
    assert payload.truncated and payload.original_bytes == original
    assert payload.result_bytes <= 512
    assert payload.result_bytes == len(msgspec.json.encode(payload.response))
    assert payload.response["truncated"] is True
    assert payload.response["original_bytes"] == original
    kept = payload.response["output"]
    assert isinstance(kept, expected_type)
    if isinstance(value, str | list):
        assert value[: len(kept)] == kept and len(kept) > 100
    else:
        assert msgspec.json.encode(value).decode().startswith(kept)


def test_unserializable_output() -> None:
    with pytest.raises(UnserializableResult, match="object"):
        payloads.output(object(), 1000)


def test_error_payload_caps_the_message() -> None:
    body = payloads.error("tool_error", "m" * 5000, retryable=True, duplicate_of="c1")["error"]
    assert len(body["message"]) == payloads.MAX_ERROR_MESSAGE
    assert body["retryable"] is True and body["duplicate_of"] == "c1"
    assert "retryable" not in payloads.error("unknown_function", "no")["error"]


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("inf"), {"rows": [1.0, {"x": float("-inf")}]}, [None, float("nan")]],
)
def test_nan_and_infinity_are_unserializable_not_null(value: Any) -> None:
    with pytest.raises(UnserializableResult, match="NaN or Infinity"):
        payloads.output(value, 1000)


def test_none_and_finite_floats_are_fine() -> None:
    assert payloads.output([None, 1.5, {"x": None}], 1000).response == {
        "output": [None, 1.5, {"x": None}]
    }


def test_shrink_keeps_the_original_size_of_a_result_cut_before() -> None:
    first = payloads.output("x" * 5000, 1000)
    again = payloads.shrink(first.response, 300)
    assert again.truncated and again.result_bytes <= 300
    assert again.original_bytes == first.original_bytes
    untouched = payloads.shrink({"output": "small"}, 300)
    assert untouched.response == {"output": "small"} and not untouched.truncated
