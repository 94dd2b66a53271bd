"""Is a call a new request, or the model asking again for an answer it could not have seen?

The rule (the contract table, docs/contract.md): an identical call (same tool, same canonical
arguments) in a later ``toolCall`` is a **re-issue** while the model cannot have seen the first
answer: the first call is still running, or its answer was never sent, or the server is not yet
known to have read it (``CallLedger.answer_seen``). A re-issue is not run again and gets the
first call's answer. Otherwise it is a **new request** and runs ("one more coffee"). A failure
is never served to a later request, so a call retried after a timeout, a cancellation or a
retryable error runs again.

With an ``idempotency_key``, calls with the same key within ``idempotency_ttl`` are one request
whatever the model saw: served from the first *successful* result (waiting for it while it runs).

``classify`` and ``served_by_key`` are the pure decisions; ``Requests`` remembers earlier
requests, bounded (the oldest is forgotten first, after which its repeat counts as new).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, Literal, TypeVar

import msgspec

from livebridge.calls.endings import OutcomeKind, is_failure

Repeat = Literal["new", "reissue"]
F = TypeVar("F")
#: How many call ids of one request (the first and its re-issues) are remembered.
MAX_IDS_PER_REQUEST = 8


def classify(first: OutcomeKind | None, *, seen: bool) -> Repeat:
    """An identical call in a later ``toolCall``, given the first call's outcome kind (None
    while it runs) and whether the model could have seen an answer of that request."""
    if first is None:
        return "reissue"
    if is_failure(first):
        return "new"
    return "new" if seen else "reissue"


def served_by_key(first: OutcomeKind | None, *, age: float, ttl: float) -> bool:
    """A call with the same idempotency key as a request ``age`` seconds old: one request?"""
    return age < ttl and (first is None or first == "ok")


class Request(msgspec.Struct, Generic[F], eq=False, gc=False):
    """One request that ran: its first call, and every call id answered with its result.

    Untracked by the garbage collector (it is never part of a reference cycle): requests are
    kept for a while, and tracked survivors are what makes collections frequent and slow.
    """

    first: F
    at: float
    ids: list[str]

    def answered_as(self, call_id: str) -> None:
        self.ids.append(call_id)
        del self.ids[:-MAX_IDS_PER_REQUEST]


#: Above this many remembered requests, a ``put`` forgets every stale one once there were as
#: many puts since the last sweep as that sweep kept requests (and at least this many).
PRUNE_ABOVE = 8
#: A stale request a later call may still look up (``retried``) outlives a sweep while it is
#: among this many newest requests kept: at most so many failures are kept for their retries.
RETRY_WINDOW = 32


class Requests(Generic[F]):
    """The newest request of each key, at most ``capacity`` (oldest forgotten first).

    ``stale(request)`` says a request can no longer change a decision (its answer was seen,
    or it failed). Above ``PRUNE_ABOVE`` requests, a ``put`` forgets every stale one, wherever
    it is, once there were as many puts since the last sweep as that sweep kept (at least
    ``PRUNE_ABOVE``): a request still running holds no others, and the answers requests pin
    (each its first call's outcome) are those the model may not have seen and about as many
    more. A sweep costs at most twice the puts since the last: O(1) per put, amortised.
    ``retried(request)``: a stale request a later call still looks up (one that failed: its
    retry keeps the request's idempotency key, ``keys``); a sweep spares it while it is among
    the newest ``RETRY_WINDOW`` requests kept.
    """

    def __init__(
        self,
        capacity: int,
        stale: Callable[[Request[F]], bool] = lambda request: False,
        retried: Callable[[Request[F]], bool] = lambda request: False,
    ) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._capacity = capacity
        #: Replaceable: a dispatcher that starts tracking reported answers judges anew.
        self.stale = stale
        self._retried = retried
        self._by_key: OrderedDict[Hashable, Request[F]] = OrderedDict()
        #: ``get(key)``: the newest request of ``key``, if remembered (the dict's own look-up,
        #: asked for every call planned).
        self.get: Callable[[Hashable], Request[F] | None] = self._by_key.get
        self._puts = 0  # since the last sweep
        self._sweep_after = PRUNE_ABOVE  # puts, then a sweep (when above ``PRUNE_ABOVE``)

    def __len__(self) -> int:
        return len(self._by_key)

    def put(self, key: Hashable, first: F, call_id: str, at: float) -> Request[F]:
        request = Request(first, at, [call_id])
        by_key = self._by_key
        by_key.pop(key, None)  # re-inserted at the newest end
        by_key[key] = request
        if len(by_key) > self._capacity:
            by_key.popitem(last=False)
        self._puts += 1
        if self._puts > self._sweep_after and len(by_key) > PRUNE_ABOVE:
            stale, retried = self.stale, self._retried
            recent = len(by_key) - RETRY_WINDOW  # from this index on: spared if retried
            for index, (old, r) in enumerate(list(by_key.items())):
                if r is not request and stale(r) and (index < recent or not retried(r)):
                    del by_key[old]
            self._puts = 0
            self._sweep_after = max(PRUNE_ABOVE, len(by_key))
        return request

    def expire(self, now: float, ttl: float) -> None:
        """Forget requests older than ``ttl`` (they are kept in age order)."""
        by_key = self._by_key
        while by_key:
            oldest = next(iter(by_key.values()))
            if now - oldest.at < ttl:
                return
            by_key.popitem(last=False)
