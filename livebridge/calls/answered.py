"""What a session remembers of the calls it answered: each id's answer, within a byte budget.

A call id answered earlier is answered again without running (docs/contract.md). The newest
answers keep their payload while together they fit ``CallPolicy.remembered_bytes``, each
charged its encoded size plus ``ANSWER_OVERHEAD`` (the record and the Python objects of a small
payload). An older answer keeps only its kind: a re-delivery of its id is still not run, and
is answered ``already_answered`` (``outcomes.already_answered``). At most ``capacity`` ids are
remembered; beyond them the oldest is forgotten and a re-delivery of it runs again.

Entries live in one plain dict, oldest first (a remembered id answered again moves to the
newest end); the oldest are forgotten a quarter of ``capacity`` at a time, so that forgetting
costs O(1) per call and no ordered dict is paid for per entry.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable

from livebridge.calls.call import Outcome
from livebridge.calls.endings import OutcomeKind

#: Bytes charged to the budget for each remembered payload beyond its encoded size: about what
#: an ``Outcome`` with a small payload takes in memory (measured: 580 bytes for ``{"i": n}``).
ANSWER_OVERHEAD = 512


def charge(outcome: Outcome) -> int:
    """What keeping ``outcome``'s payload costs the budget."""
    return outcome.result_bytes + ANSWER_OVERHEAD


class Answers:
    """The answers of the last ``capacity`` call ids; payloads within ``budget`` bytes."""

    __slots__ = ("_budget", "_by_id", "_capacity", "_forget_at", "_kept", "_used", "get")

    def __init__(self, capacity: int, budget: int) -> None:
        if capacity < 1 or budget < 0:
            raise ValueError("capacity must be at least 1 and budget not negative")
        self._capacity = capacity
        self._forget_at = capacity + capacity // 4  # ids; then forgotten down to ``capacity``
        self._budget = budget
        #: id -> its answer with payload, or only its kind once the payload was let go.
        self._by_id: dict[str, Outcome | OutcomeKind] = {}
        #: ``get(call_id)``: its answer (its kind alone once its payload was let go), if any;
        #: the dict's own look-up, asked for every call planned.
        self.get: Callable[[str], Outcome | OutcomeKind | None] = self._by_id.get
        self._kept: deque[str] = deque()  # ids whose payloads were kept, oldest first
        self._used = 0  # bytes charged for the payloads kept

    def __len__(self) -> int:
        return len(self._by_id)

    @property
    def used(self) -> int:
        """Bytes charged for the payloads kept now (at most the budget)."""
        return self._used

    def answered_again(self, call_id: str) -> None:
        """``call_id`` was answered again from here: it is now the newest id."""
        by_id = self._by_id
        by_id[call_id] = by_id.pop(call_id)

    def put(self, outcome: Outcome) -> None:
        """Remember ``outcome`` as its id's answer (it replaces another answer of that id).

        Past the budget (or ``capacity`` payloads), the oldest payloads are let go until the
        rest fit; their kinds stay. Inline: once the budget is reached, every put lets one go.
        """
        by_id, call_id = self._by_id, outcome.call_id
        earlier = by_id.get(call_id)
        if earlier is not None:
            if earlier is outcome or isinstance(earlier, str):  # answered again from here
                return
            self._used -= charge(earlier)  # a second settle of a running id (a rejoin cancelled)
        elif len(by_id) >= self._forget_at:
            self._forget_oldest()
        by_id[call_id] = outcome
        kept = self._kept
        kept.append(call_id)
        used = self._used + outcome.result_bytes + ANSWER_OVERHEAD  # ``charge``, inline
        budget, capacity = self._budget, self._capacity
        while kept and (used > budget or len(kept) > capacity):
            entry = by_id.get(call_id := kept.popleft())
            if entry is not None and not isinstance(entry, str):
                by_id[call_id] = entry.kind
                used -= entry.result_bytes + ANSWER_OVERHEAD
        self._used = used

    def _forget_oldest(self) -> None:
        """Forget the oldest ids down to ``capacity``."""
        by_id = self._by_id
        excess = len(by_id) - self._capacity + 1
        for call_id in list(itertools.islice(by_id, excess)):
            entry = by_id.pop(call_id)
            if not isinstance(entry, str):
                self._used -= charge(entry)
