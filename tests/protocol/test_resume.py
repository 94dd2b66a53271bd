import itertools

import pytest

from livebridge.errors import (
    ConnectionLostError,
    FrameTooLargeError,
    InvalidPayloadError,
    LiveSessionError,
    ModelNotFoundError,
    OperationAbortedError,
    PolicyViolationError,
    ServerError,
    SessionNotFoundError,
)
from livebridge.protocol.resume import (
    backoff,
    classify_close,
    keepalive_settings,
    reconnect_deadline,
)
from livebridge.vendors.gemini.wire import parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("50s", 50.0),
        ("10s", 10.0),
        ("1.5s", 1.5),
        ("0.250s", 0.25),
        ("0.000000001s", 1e-9),
        ("0s", 0.0),
        ("-2.5s", -2.5),
        (" 57s ", 57.0),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "50", "s", "1.s", ".5s", "1.5 s", "1m", "1.0000000001s", "x"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="Duration"):
        parse_duration(text)


def test_backoff_without_jitter_doubles_up_to_the_cap() -> None:
    delays = list(itertools.islice(backoff(jitter=0.0), 8))
    assert delays == [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


@pytest.mark.parametrize(("rand", "expected"), [(0.0, 0.9), (0.5, 1.0), (0.999, 1.0998)])
def test_backoff_jitter_spreads_each_delay(rand: float, expected: float) -> None:
    delays = backoff(initial=1.0, factor=3.0, maximum=5.0, jitter=0.1, rand=lambda: rand)
    first, second, third = itertools.islice(delays, 3)
    assert first == pytest.approx(expected)
    assert second == pytest.approx(3 * expected)
    assert third == pytest.approx(5 * expected)


@pytest.mark.parametrize(
    ("initial", "factor", "maximum", "jitter"),
    [
        (0.0, 2.0, 10.0, 0.1),
        (1.0, 0.5, 10.0, 0.1),
        (1.0, 2.0, 0.5, 0.1),
        (1.0, 2.0, 10.0, 1.0),
        (1.0, 2.0, 10.0, -0.1),
    ],
)
def test_backoff_rejects_bad_settings(
    initial: float, factor: float, maximum: float, jitter: float
) -> None:
    with pytest.raises(ValueError, match="initial"):
        next(backoff(initial, factor, maximum, jitter))


DEADLINE = "Deadline expired before operation could complete."
MODEL_GONE = (
    "Request trace id: 1, [ORIGINAL ERROR] generic::not_found: models/gemini-2.0-flash-001 "
    "is not found for API v"
)


@pytest.mark.parametrize(
    ("code", "reason", "go_away", "retry", "resume", "label", "error"),
    [
        (1000, "", False, False, False, "closed", None),
        (1000, "", True, True, True, "go_away", None),
        (None, "", False, True, True, "dropped", ConnectionLostError),
        (1006, "", False, True, True, "dropped", ConnectionLostError),
        (1001, "", False, True, True, "dropped", ConnectionLostError),
        (
            1011,
            "keepalive ping timeout",
            False,
            True,
            True,
            "keepalive_timeout",
            ConnectionLostError,
        ),
        (
            1011,
            "The service is currently unavailable.",
            False,
            True,
            True,
            "server_error",
            ServerError,
        ),
        (1011, "Internal error occurred", False, True, True, "server_error", ServerError),
        (1011, DEADLINE, False, True, True, "server_error", ServerError),
        (1011, DEADLINE, True, True, True, "go_away", None),
        (
            1007,
            "Request contains an invalid argument",
            False,
            False,
            False,
            "invalid_payload",
            InvalidPayloadError,
        ),
        (1007, "anything", True, False, False, "invalid_payload", InvalidPayloadError),
        (1008, MODEL_GONE, False, False, False, "model_not_found", ModelNotFoundError),
        (
            1008,
            "BidiGenerateContent session not found",
            False,
            False,
            False,
            "session_not_found",
            SessionNotFoundError,
        ),
        (
            1008,
            "The operation was aborted.",
            False,
            False,
            False,
            "operation_aborted",
            OperationAbortedError,
        ),
        (
            1008,
            "Requested entity was not found.",
            False,
            False,
            False,
            "policy_violation",
            PolicyViolationError,
        ),
        (
            1008,
            "Operation is not implemented, or supported, or enabled.",
            False,
            False,
            False,
            "policy_violation",
            PolicyViolationError,
        ),
        (1002, "protocol error", False, False, False, "unexpected_close", LiveSessionError),
        (4000, "", False, False, False, "unexpected_close", LiveSessionError),
    ],
)
def test_classify_close(
    code: int | None,
    reason: str,
    go_away: bool,
    retry: bool,
    resume: bool,
    label: str,
    error: type[LiveSessionError] | None,
) -> None:
    assert retry == resume  # a close is either resumed or the end
    decision = classify_close(code, reason, after_go_away=go_away)
    assert (decision.action, decision.reason) == ("resume" if retry else "end", label)
    if error is None:
        assert decision.error is None
    else:
        assert type(decision.error) is error
        assert isinstance(decision.error, LiveSessionError)
        assert decision.error.code == code
        assert decision.error.reason == reason


@pytest.mark.parametrize(
    ("code", "reason", "advice"),
    [
        (1007, "Unknown name", "Fix the message"),
        (1008, MODEL_GONE, "Check the model name"),
        (1008, "BidiGenerateContent session not found", "without a handle"),
        (1008, "The operation was aborted.", "hold or drop"),
        (1011, "Internal error occurred", "retry later"),
        (1011, "keepalive ping timeout", "ping_timeout"),
        (1006, "", "network"),
    ],
)
def test_error_messages_say_what_to_do(code: int, reason: str, advice: str) -> None:
    error = classify_close(code, reason).error
    assert error is not None
    assert advice in str(error)
    assert isinstance(error, LiveSessionError)


def test_frame_over_the_client_limit_is_resumed_with_a_typed_error() -> None:
    reason = "frame with 5000000 bytes exceeds limit of 4194304 bytes"
    decision = classify_close(1009, reason)
    assert (decision.action, decision.reason) == ("resume", "frame_too_large")
    assert isinstance(decision.error, FrameTooLargeError)
    assert (decision.error.size, decision.error.limit) == (5_000_000, 4_194_304)
    assert "max_size" in str(decision.error)
    compressed = classify_close(1009, "frame exceeds limit of 4194304 bytes").error
    assert isinstance(compressed, FrameTooLargeError)
    assert (compressed.size, compressed.limit) == (None, 4_194_304)


def test_error_tree_has_one_root() -> None:
    policy: list[type[LiveSessionError]] = [
        ModelNotFoundError,
        SessionNotFoundError,
        OperationAbortedError,
    ]
    assert all(issubclass(kind, PolicyViolationError) for kind in policy)
    roots = [ConnectionLostError, ServerError, InvalidPayloadError, PolicyViolationError]
    assert all(kind.__mro__[1] is LiveSessionError for kind in roots)


@pytest.mark.parametrize(
    ("received_at", "time_left", "margin", "deadline"),
    [
        (100.0, 50.0, 5.0, 145.0),
        (100.0, 10.0, 5.0, 105.0),
        (100.0, 3.0, 5.0, 100.0),
        (0.0, 0.0, 5.0, 0.0),
    ],
)
def test_reconnect_deadline(
    received_at: float, time_left: float, margin: float, deadline: float
) -> None:
    assert reconnect_deadline(received_at, time_left, margin) == deadline


def test_keepalive_tolerates_slow_pongs() -> None:
    settings = keepalive_settings()
    assert settings["ping_interval"] == 20.0
    assert settings["ping_timeout"] >= 30.0
