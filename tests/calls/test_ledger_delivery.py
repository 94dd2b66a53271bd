"""The ledger's view of delivery: could the model have seen an answer, and does it fit one frame."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from livebridge.calls import frame_budget
from livebridge.calls.lives import Outgoing
from livebridge.protocol.transport import ToolAnswers
from livebridge.vendors.gemini import answers as gemini_live
from livebridge.vendors.gemini.client_frames import encode_client
from tests.calls.test_ledger import blocking, new_ledger, non_blocking, ok, send, sent_ids
from tests.support.hypothesis_profiles import examples

# -- acknowledgement: could the model have seen an answer? -------------------------------------


def test_an_answer_is_seen_once_a_later_server_message_arrives_on_its_connection() -> None:
    ledger = new_ledger()
    ledger.receive([blocking("a")], now=0.0)
    ledger.settle(ok("a"))
    ledger.server_message()  # before the answer left: acknowledges nothing
    assert not ledger.answer_seen("a")
    assert sent_ids(ledger) == ["a"]
    assert not ledger.answer_seen("a")
    ledger.server_message()
    assert ledger.answer_seen("a")


def test_an_answer_sent_on_a_connection_that_ended_unacknowledged_is_not_seen() -> None:
    ledger = new_ledger()
    ledger.receive([blocking("a")], now=0.0)
    ledger.handle_issued("h1")
    ledger.settle(ok("a"))
    assert sent_ids(ledger) == ["a"]
    ledger.disconnected()
    ledger.resumed("h1", 1.0)
    ledger.server_message()  # on the new connection: says nothing of the old one
    assert not ledger.answer_seen("a")


def test_an_answer_never_sent_is_not_seen_and_a_forgotten_one_counts_as_seen() -> None:
    ledger = new_ledger(history=1)
    ledger.receive([blocking("a")], now=0.0)
    ledger.settle(ok("a"))
    ledger.close(1.0)  # orphaned: never sent
    ledger.server_message()
    assert not ledger.answer_seen("a")
    assert ledger.answer_seen("never-received")


def test_where_reads_are_proven_a_server_message_crossing_the_answer_proves_nothing() -> None:
    # The server sent a message, then re-issued the running call, before it read the answer;
    # the client read that message after its answer left. Only the pong of the ping sent behind
    # the answer says the server has read it.
    ledger = new_ledger()
    ledger.reads_proven = True
    ledger.receive([blocking("a")], now=0.0)
    ledger.settle(ok("a"))
    assert sent_ids(ledger) == ["a"]
    first = ledger.sends
    ledger.server_message()  # sent before the server read the answer
    assert not ledger.answer_seen("a")
    ledger.receive([blocking("b")], now=1.0)
    ledger.settle(ok("b"))
    assert sent_ids(ledger) == ["b"]
    ledger.read_through(first)  # the pong behind the first answer: not the second
    assert ledger.answer_seen("a") and not ledger.answer_seen("b")
    ledger.read_through(ledger.sends)
    assert ledger.answer_seen("b")


def test_a_pong_of_an_earlier_connection_proves_nothing_of_the_next() -> None:
    ledger = new_ledger()
    ledger.reads_proven = True
    ledger.receive([blocking("a")], now=0.0)
    ledger.handle_issued("h1")
    ledger.settle(ok("a"))
    assert sent_ids(ledger) == ["a"]
    ledger.disconnected()
    ledger.resumed("h1", 1.0)
    ledger.read_through(ledger.sends)  # the old connection's pong, handled late
    assert not ledger.answer_seen("a")


# -- frame budget -------------------------------------------------------------------------------


def encoded_message_size(message: Outgoing) -> int:
    """The size of the frame the transport sends, checked against encoding it anew."""
    frame = encode_client(ToolAnswers(message.function_responses, message.encoded))
    if message.encoded is not None:  # measured in one encode: sent as is, and the same bytes
        assert message.encoded == msgspec.json.encode(message.function_responses)
    assert frame == msgspec.json.encode(gemini_live.tool_response(message.function_responses))
    return len(frame)


def test_a_blocking_batch_is_cut_fairly_to_fit_one_frame() -> None:
    ledger = new_ledger(max_frame_bytes=4096)
    ledger.receive([blocking(i) for i in "abc"], now=0.0)
    ledger.settle(ok("a", value="x" * 100))  # small: untouched
    ledger.settle(ok("b", value="y" * 5000))
    ledger.settle(ok("c", value="z" * 9000))
    message = send(ledger)
    assert message is not None and encoded_message_size(message) <= 4096
    responses = {r["id"]: r["response"] for r in message.function_responses}
    assert responses["a"] == {"output": "x" * 100}
    assert responses["b"]["truncated"] and responses["c"]["truncated"]
    assert responses["b"]["original_bytes"] < responses["c"]["original_bytes"]
    assert abs(len(responses["b"]["output"]) - len(responses["c"]["output"])) <= 16  # fair
    answered = {a.call_id: a.outcome for a in message.answered}
    assert answered["c"] is not None and answered["c"].truncated
    assert ledger.idle


def test_non_blocking_answers_that_do_not_fit_go_in_the_next_message() -> None:
    ledger = new_ledger(max_frame_bytes=4096)
    ledger.receive([non_blocking(i) for i in "abc"], now=0.0)
    for call_id in "abc":
        ledger.settle(ok(call_id, "g", value="v" * 1500))
    first, second = send(ledger), send(ledger)
    assert first is not None and second is not None and send(ledger) is None
    assert first.encoded is None  # taken unit by unit: the transport encodes what was taken
    assert [r["id"] for r in first.function_responses] == ["a", "b"]
    assert [r["id"] for r in second.function_responses] == ["c"]
    assert all(encoded_message_size(m) <= 4096 for m in (first, second))
    assert "truncated" not in second.function_responses[0]["response"]


@settings(max_examples=examples(120), deadline=None)
@given(
    st.integers(1024, 20_000),
    st.lists(
        st.tuples(
            st.booleans(),
            st.lists(st.integers(0, 30_000), min_size=1, max_size=16),
            st.sampled_from(["str", "list", "dict"]),
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_random_batches_always_encode_within_the_frame_budget(
    budget: int, batches: list[tuple[bool, list[int], str]]
) -> None:
    # CallPolicy guarantees this much room per call of a batch
    budget = max(budget, frame_budget.BYTES_PER_CALL * max(len(sizes) for _, sizes, _ in batches))
    ledger = new_ledger(max_frame_bytes=budget)
    expected: list[str] = []
    for number, (is_blocking, sizes, shape) in enumerate(batches):
        ids = [f"{number}-{i}" for i in range(len(sizes))]
        make = blocking if is_blocking else non_blocking
        name = "f" if is_blocking else "g"
        ledger.receive([make(i, name) for i in ids], now=0.0)
        for call_id, size in zip(ids, sizes, strict=True):
            value: Any = {
                "str": "é" * size,
                "list": list(range(size // 4)),
                "dict": {"k": "x" * size},
            }[shape]
            ledger.settle(ok(call_id, name, value))
        expected += ids
    answered: list[str] = []
    while (message := send(ledger)) is not None:
        assert encoded_message_size(message) <= budget
        answered += [r["id"] for r in message.function_responses]
    assert sorted(answered) == sorted(expected) and ledger.idle
