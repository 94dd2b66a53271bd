"""The idempotency key a handler forwards to its side effect (``CallContext.idempotency_key``).

Fencing protects only what checks the token; a payment provider checks an idempotency key.
The key must be the same for every run attempt of one request and different for two requests,
also when nothing else survives: a store that lost the ``started`` entry in a failover (Redis
promoting a lagging replica), an ``idempotent=True`` call that was never journaled. So it is
*derived*, never stored: a digest of

- the **scope**: the conversation id with a store (the same on every worker), else a random
  token of the dispatcher;
- the **epoch**: the number of the resumable handle the conversation is at (``Journal.seq``,
  0 without a store). A worker that takes over resumes that handle, so it is at the same
  number; a request after the next handle is a new one;
- the tool, its canonical arguments, and their **ordinal** within the epoch: the second coffee
  asked after the first was answered is ordinal 2.

A re-issue never runs (it waits for the first call's answer). A call retried after a failure
(a timeout, an error) keeps its request's key: the first attempt may have taken effect, and
the provider is the one who knows.
"""

from __future__ import annotations

import hashlib
import itertools
import secrets


class RequestKeys:
    """The keys of the requests a dispatcher ran, the newest ``capacity`` remembered (up to a
    quarter more before the oldest are forgotten together).

    Each request is remembered by a digest of its tool and arguments, with its epoch and
    ordinal packed in one int (about 100 bytes a request, whatever its arguments): its key is
    derived again when a retry needs it.
    """

    __slots__ = ("_capacity", "_last", "scope")

    def __init__(self, scope: str | None = None, capacity: int = 4096) -> None:
        self.scope = scope if scope is not None else secrets.token_hex(8)
        self._capacity = capacity
        #: digest of (tool, arguments) -> epoch << 32 | ordinal, oldest first (a plain dict:
        #: an ordered one costs twice as much per entry; the oldest go a quarter at a time)
        self._last: dict[bytes, int] = {}

    def key(self, name: str, canonical: bytes, epoch: int, *, retry: bool) -> str:
        """The key of a request about to run; ``retry``: the same request failed before."""
        request = hashlib.blake2b(name.encode() + b"\0" + canonical, digest_size=16).digest()
        last = self._last.pop(request, None)
        if last is not None and retry:
            self._last[request] = last
            return self._derive(name, canonical, last >> 32, last & _ORDINAL)
        ordinal = (last & _ORDINAL) + 1 if last is not None and last >> 32 == epoch else 1
        last_of = self._last
        last_of[request] = epoch << 32 | ordinal
        if len(last_of) > self._capacity + self._capacity // 4:
            for old in list(itertools.islice(last_of, len(last_of) - self._capacity)):
                del last_of[old]
        return self._derive(name, canonical, epoch, ordinal)

    def _derive(self, name: str, canonical: bytes, epoch: int, ordinal: int) -> str:
        digest = hashlib.blake2b(digest_size=16)
        for part in (self.scope, str(epoch), name, str(ordinal)):
            digest.update(part.encode() + b"\0")
        digest.update(canonical)
        return f"lb-{digest.hexdigest()}"


_ORDINAL = (1 << 32) - 1
