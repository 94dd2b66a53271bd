"""What the voice-agent server checks before a browser's frame reaches a Live session."""

from __future__ import annotations

import time
from collections.abc import Callable
from urllib.parse import urlsplit

__all__ = ["TextRateLimit", "same_or_allowed_origin"]


class TextRateLimit:
    """A token bucket over one connection's text frames.

    ``burst`` frames may arrive at once; after that one more is allowed every ``1 / rate``
    seconds. A frame over the limit is not forwarded (the browser gets a ``rate_limited`` error).
    """

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()

    def allow(self) -> bool:
        """Take one token if there is one."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True


def same_or_allowed_origin(origin: str, host: str | None, allowed: frozenset[str]) -> bool:
    """Whether a page from ``origin`` may open ``/ws`` on the server reached as ``host``."""
    if origin in allowed:
        return True
    parts = urlsplit(origin)
    return (
        parts.scheme in ("http", "https")
        and host is not None
        and parts.netloc.lower() == host.lower()
    )
