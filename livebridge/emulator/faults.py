"""Fault injection: what the emulator does to frames on their way, and how it drops connections."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MessagePredicate = Callable[[dict[str, Any]], bool]


@dataclass(frozen=True, slots=True)
class Faults:
    """Faults applied to every connection of an emulator.

    ``delay``: seconds added before each server frame (order is kept).
    ``drop``: server frames for which it returns True are never sent (still in the transcript,
    marked ``dropped``).
    ``drop_client``: client frames for which it returns True are ignored as if lost.
    ``abort_after_tool_call``: the TCP connection is cut (no close frame, the client sees 1006)
    right after the first ``toolCall`` is sent.
    ``read_delay``: seconds the server waits before reading each client frame (a slow reader).
    """

    delay: float = 0.0
    drop: MessagePredicate | None = None
    drop_client: MessagePredicate | None = None
    abort_after_tool_call: bool = False
    read_delay: float = 0.0
