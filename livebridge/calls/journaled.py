"""What the dispatcher asks of a conversation's journal, which ``livebridge.store.journal``
keeps on a shared store: the calls below run once across workers because the journal answers
a call it has seen, and each handler gets the lease's epoch as its fence."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

from livebridge.calls.call import Call, Outcome
from livebridge.calls.tools import Tool


class Fence(Protocol):
    """A lease as the dispatcher sees it: the epoch that only grows with each takeover."""

    @property
    def epoch(self) -> int: ...


class Ticket(Protocol):
    """The journal's part in one call that runs: before the handler, and once answered."""

    async def begin(self) -> None:
        """Journal the call as started; raises ``StoreError`` (the handler must not run)."""
        ...

    def settled(self, outcome: Outcome) -> None:
        """Journal the answer (deferred: never on the answer's critical path)."""
        ...


class CallJournal(Protocol):
    """What the dispatcher asks a conversation's journal (``livebridge.store.journal``).

    ``conversation`` and ``seq`` (the resumable handle the conversation is at) scope a
    handler's idempotency key; ``lease.epoch`` is the fence a handler runs under."""

    conversation: str
    seq: int

    @property
    def lease(self) -> Fence:
        """The lease the conversation is held with: its epoch fences the handler."""
        ...

    def admit(
        self, call: Call, tool: Tool, request: bytes, key: Hashable | None
    ) -> Outcome | Ticket | None:
        """Before a call runs: answer it from the journal (an ``Outcome``), journal it
        (a ``Ticket``), or let it run unjournaled (None)."""
        ...
