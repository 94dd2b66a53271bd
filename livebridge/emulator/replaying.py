"""What every vendor's replay side shares: the recorded pace, and how an answer is judged.

An answer body is ``{"output": ...}`` or ``{"error": {...}}`` on every wire (the ledger's
encoder writes both); its kind is ``ok`` or ``error``, an error is compared by its ``type``
only (its message may quote what changes from run to run).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from livebridge.recording.report import MAX_GAP, Pace


class Clock:
    """Recorded pace: sleep until a recorded time, counted from the last point both share.

    A gap between two entries longer than ``MAX_GAP`` seconds is played as ``MAX_GAP``: a
    recording (hand-edited, or of a session left idle) cannot hold the replay for longer."""

    def __init__(self, pace: Pace, start: float) -> None:
        self._recorded = pace == "recorded"
        self._anchor = (asyncio.get_running_loop().time(), start)
        self._last = start  # the recorded time of the last entry played

    async def until(self, t: float) -> None:
        if self._recorded:
            loop = asyncio.get_running_loop()
            gap = t - self._last
            if gap > MAX_GAP:  # played as MAX_GAP: the later times follow from there
                real, recorded = self._anchor
                self._anchor = (real + (self._last - recorded) + MAX_GAP, t)
            self._last = max(self._last, t)
            wait = self._anchor[0] + (t - self._anchor[1]) - loop.time()
            await asyncio.sleep(min(max(0.0, wait), MAX_GAP))

    def sync(self, t: float) -> None:
        """Recorded time ``t`` is now (the client's answers arrived)."""
        self._anchor = (asyncio.get_running_loop().time(), t)
        self._last = max(self._last, t)


def kind(body: Any) -> str:
    """``error`` for an error answer, else ``ok``."""
    return "error" if isinstance(body, dict) and "error" in body else "ok"


def error_type(body: Any) -> Any:
    """An error answer reduced to its ``type`` (what a replay compares of it)."""
    error = body.get("error") if isinstance(body, dict) else None
    return {"error": {"type": error.get("type")}} if isinstance(error, dict) else body


def error_text(body: Any, width: int = 120) -> str:
    """An error answer as ``RuntimeError: the service is down``, else its JSON; shortened."""
    error = body.get("error")
    if isinstance(error, dict) and ("type" in error or "message" in error):
        text = ": ".join(str(error[k]) for k in ("type", "message") if error.get(k) is not None)
    else:
        text = json.dumps(error, default=repr)
    return text if len(text) <= width else text[: width - 3] + "..."
