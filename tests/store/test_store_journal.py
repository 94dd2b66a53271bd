"""The journal's decisions, one by one: which calls are journaled, what a takeover recalls."""

from __future__ import annotations

import time
from typing import Any

import msgspec
import pytest

from livebridge import Call, ToolRegistry
from livebridge.calls.call import Outcome
from livebridge.store import Entry, HandleRecord, MemoryStore, Snapshot
from livebridge.store.base import key_digest, request_digest
from livebridge.store.journal import Journal, journaled

tools = ToolRegistry()


@tools.tool
async def book(city: str) -> str:
    """Not idempotent."""
    return city


@tools.tool(idempotent=True)
async def weather(city: str) -> str:
    """Idempotent."""
    return city


@tools.tool(idempotency_key=lambda args: args["order"])
async def pay(order: str) -> str:
    """Idempotent by key."""
    return order


ARGS = b'{"city":"Paris"}'


def entry(call_id: str, name: str, epoch: int, **extra: Any) -> Entry:
    args = b'{"order":"o-1"}' if name == "pay" else ARGS
    fields: dict[str, Any] = {"state": "started", **extra}
    return Entry(
        call_id,
        name,
        request_digest(name, args),
        epoch=epoch,
        owner="dead",
        started_at=0.0,
        **fields,
    )


def taken_over(*entries: Entry, seq: int = 3) -> Journal:
    journal = Journal(MemoryStore(), "c", "me")
    handle = HandleRecord("h", seq, time.time())
    journal.restore(Snapshot(handle, list(entries)))
    return journal


def admit(journal: Journal, name: str, call_id: str = "new-1", key: Any = None) -> Any:
    tool = tools.get(name)
    assert tool is not None
    args = {"order": "o-1"} if name == "pay" else {"city": "Paris"}
    canonical = b'{"order":"o-1"}' if name == "pay" else ARGS
    return journal.admit(Call(call_id, name, args), tool, canonical, key)


def test_which_tools_are_journaled() -> None:
    assert [journaled(t) for t in tools] == ["before", None, "after"]


def test_an_irreversible_tool_is_journaled_before_it_runs_whatever_else_it_says() -> None:
    more = ToolRegistry()

    @more.tool(irreversible=True, idempotent=True)
    async def hang_up(reason: str) -> str:
        """Irreversible, even if repeating it would change nothing."""
        return reason

    @more.tool(irreversible=True, idempotency_key=lambda args: args["reason"])
    async def refund(reason: str) -> str:
        """Irreversible, with a key."""
        return reason

    assert [journaled(t) for t in more] == ["before", "before"]


def test_only_entries_the_resumed_conversation_does_not_know_are_candidates() -> None:
    journal = Journal(MemoryStore(), "c", "me")
    known = entry("old", "book", 2)
    unknown = entry("gone", "book", 3)
    answered = entry("done", "weather", 4, state="settled", kind="ok", response={"output": 1})
    assert journal.restore(Snapshot(HandleRecord("h", 3, 0.0), [known, unknown, answered])) == 1
    assert journal.seq == 3 and journal.candidates == 2


def test_a_started_non_idempotent_call_is_outcome_unknown_until_the_next_handle() -> None:
    journal = taken_over(entry("gone", "book", 3))
    first = admit(journal, "book", "new-1")
    assert isinstance(first, Outcome) and first.kind == "rejected"
    assert first.response["error"]["type"] == "outcome_unknown"
    assert first.duplicate_of == "gone"
    again = admit(journal, "book", "new-2")  # the model asked again before seeing the answer
    assert isinstance(again, Outcome) and again.call_id == "new-2"
    journal.handle("h-next")  # the model saw the answer: an identical call is a new request
    assert journal.seq == 4
    assert not isinstance(admit(journal, "book", "new-3"), Outcome | None)  # a ticket: it runs


def test_a_started_idempotent_call_runs_again() -> None:
    journal = taken_over(entry("gone", "weather", 3))
    assert admit(journal, "weather") is None  # not journaled, not recalled: it runs


def test_a_recorded_answer_is_served_and_a_recorded_failure_is_not() -> None:
    answer = {"output": {"table": 7}}
    ok = entry("gone", "book", 3, state="settled", kind="ok", response=answer)
    recalled = admit(taken_over(ok), "book")
    assert isinstance(recalled, Outcome)
    assert (recalled.kind, recalled.response, recalled.dedup) == ("duplicate", answer, "journal")
    failed = msgspec.structs.replace(ok, kind="error", response={"error": {"type": "x"}})
    assert not isinstance(admit(taken_over(failed), "book"), Outcome | None)


def test_the_same_call_id_keeps_its_own_kind() -> None:
    ok = entry("same-id", "book", 3, state="settled", kind="ok", response={"output": 1})
    recalled = admit(taken_over(ok), "book", "same-id")
    assert isinstance(recalled, Outcome) and recalled.kind == "ok"


def test_an_idempotency_key_matches_across_different_arguments() -> None:
    key = ("pay", "o-1")
    paid = entry("gone", "pay", 3, state="settled", kind="ok", response={"output": "paid"})
    paid = msgspec.structs.replace(paid, request="another-request", key=key_digest("pay", key))
    recalled = admit(taken_over(paid), "pay", key=key)
    assert isinstance(recalled, Outcome) and recalled.response == {"output": "paid"}


@pytest.mark.parametrize("name", ["book", "pay"])
async def test_tickets_write_started_before_and_settled_after(name: str) -> None:
    journal = Journal(MemoryStore(), "c", "me")
    journal.lease = await journal.store.acquire("c", "me", 10.0)
    ticket = admit(journal, name, key=("pay", "o-1") if name == "pay" else None)
    await ticket.begin()
    started = [e.state for e in (await journal.store.load("c")).entries]
    assert started == (["started"] if name == "book" else [])
    ticket.settled(Outcome("new-1", name, "ok", {"output": "x"}))
    await journal.flush()
    (settled,) = (await journal.store.load("c")).entries
    assert (settled.state, settled.kind, settled.response) == ("settled", "ok", {"output": "x"})
