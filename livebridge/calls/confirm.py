"""Irreversible calls held until the model's turn that issued them is confirmed.

A model can issue a call in a generation the user then interrupts (pipecat#4997: an ``end_call``
from a discarded generation hung up on a live caller). A tool registered ``irreversible=True``
therefore starts only once its turn is confirmed. The vendor's protocol knows what confirms a
turn and what withdraws it; it says so through ``RunCalls.confirmed`` and ``ConfirmCalls``
(``livebridge.protocol.actions``), and the dispatcher asks this gate before the handler starts.

- A call admitted with its turn unconfirmed is ``hold``-ed with a deadline: the end of the
  confirmation window (``CallPolicy.confirm_window``). Nothing heard by then confirms it.
- ``decide(ids, None)`` confirms (Gemini ``generationComplete`` or ``turnComplete``);
  ``decide(ids, why)`` withdraws (``interrupted``, new user input): the call then ends
  ``cancelled`` without running (``outcomes.unconfirmed``).
- A verdict may come before the call reaches ``wait`` (it was waiting for a slot): it is kept.

Sans-I/O but for ``wait``, which awaits the verdict on the event loop's clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

_UNDECIDED = object()


class _Hold:
    __slots__ = ("decided", "until", "verdict")

    def __init__(self, until: float) -> None:
        self.until = until  # the loop time at which silence confirms it
        self.verdict: object = _UNDECIDED  # None: confirmed; a str: why it was withdrawn
        self.decided: asyncio.Event | None = None


class TurnGate:
    """The held calls of one dispatcher, by id."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: dict[str, _Hold] = {}

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, call_id: str, until: float) -> None:
        """``call_id`` waits for its turn, at the latest until the loop time ``until``."""
        self._held[call_id] = _Hold(until)

    def decide(self, call_ids: Iterable[str], withdrawn: str | None = None) -> None:
        """The turn of these calls is confirmed (``withdrawn`` None) or withdrawn (why);
        ids not held, or decided already, are left as they are."""
        for call_id in call_ids:
            hold = self._held.get(call_id)
            if hold is None or hold.verdict is not _UNDECIDED:
                continue
            hold.verdict = withdrawn
            if hold.decided is not None:
                hold.decided.set()

    def forget(self, call_id: str) -> None:
        """The call ended (cancelled before it got here, say): nothing is held for it."""
        self._held.pop(call_id, None)

    async def wait(self, call_id: str) -> str | None:
        """None once the call may start (confirmed, or never held), else why it may not."""
        hold = self._held.get(call_id)
        if hold is None:
            return None
        try:
            if hold.verdict is _UNDECIDED:
                hold.decided = asyncio.Event()
                try:
                    async with asyncio.timeout_at(hold.until):
                        await hold.decided.wait()
                except TimeoutError:
                    return None  # the window passed in silence: confirmed
            verdict = hold.verdict
            return verdict if isinstance(verdict, str) else None
        finally:
            self._held.pop(call_id, None)
