"""The session-wide gate of GPT-Live's Responses delegation, and the backend's input budget.
Sans-I/O.

The service refuses ``response.create`` (``function_call_outputs_required``) while any function
call in the session is unanswered, across delegations, and never retries a refused one: the
backend then stays silent for good. So exactly one ``response.create`` goes out per set of
outputs, and only once the gate is open:

- no call of the session is open (every call admitted has had its output sent, or its
  response failed: the service drops a failed response's calls);
- no backend response is still running (one that has not ended may emit more calls);
- at least one output (or queued user text) went out since the last ``response.create``.

Calls are attributed to the newest ``response.created`` of their delegation (the nested
``response.output_item.done`` carries no response id).

The budget: the backend keeps its input for the whole session, at most ``items`` items and
``bytes`` UTF-8 bytes; an item past it is refused (``response_input_buffer_full``) and its call
stays open, which wedges the gate. ``allowance`` says how many bytes one call's output may take
so that every other open call can still be answered with ``RESERVE`` bytes.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Final

from livebridge.protocol.transport import Frames

#: The ``event_id`` prefixes of what livebridge sends (the service echoes them in errors).
CREATE_PREFIX: Final = "livebridge_continue_"
OUTPUT_PREFIX: Final = "livebridge_output_"
#: Bytes kept for each open call's output, so that none is left without room for an answer.
RESERVE: Final = 256
_KNOWN: Final = 4096


@dataclass(slots=True)
class Budget:
    """What is left of the backend's session input (``None`` figures: no limit)."""

    items: int | None
    bytes: int | None
    used_items: int = 0
    used_bytes: int = 0

    def left(self) -> tuple[int | None, int | None]:
        items = None if self.items is None else self.items - self.used_items
        size = None if self.bytes is None else self.bytes - self.used_bytes
        return items, size

    def charge(self, size: int) -> None:
        self.used_items += 1
        self.used_bytes += size


@dataclass(slots=True)
class Gate:
    """See the module docstring."""

    budget: Budget = field(default_factory=lambda: Budget(None, None))
    #: Running backend responses: response id -> delegation id.
    running: dict[str, str | None] = field(default_factory=dict)
    #: The newest response of each delegation (and of ``None``: any).
    newest: dict[str | None, str] = field(default_factory=dict)
    #: Open calls: call id -> response id.
    open: dict[str, str | None] = field(default_factory=dict)
    #: Open calls whose output already has its bytes charged.
    charged: set[str] = field(default_factory=set)
    owed: bool = False
    creates: int = 0
    refusals: int = 0
    _held: bool = False  # a create was refused: hold until something changes
    _sent: str | None = None
    _seen: OrderedDict[str, None] = field(default_factory=OrderedDict)
    _ids: Any = field(default_factory=lambda: itertools.count(1))

    @property
    def is_open(self) -> bool:
        return not self.open and not self.running

    def response_created(self, delegation_id: str | None, response_id: str | None) -> None:
        key = response_id or f"anonymous-{next(self._ids)}"
        self.running[key] = delegation_id
        self.newest[delegation_id] = key
        self.newest[None] = key

    def call(self, delegation_id: str | None, call_id: str) -> str | None:
        """A completed ``function_call`` item; returns its response id, or None when this id
        was seen already (never admitted twice)."""
        if call_id in self._seen:
            return None
        self._seen[call_id] = None
        if len(self._seen) > _KNOWN:
            self._seen.popitem(last=False)
        response_id = self.newest.get(delegation_id) or self.newest.get(None)
        self.open[call_id] = response_id
        self._held = False
        return response_id

    def response_ended(
        self, delegation_id: str | None, response_id: str | None, completed: bool
    ) -> list[str]:
        """A terminal event; returns the open calls the service dropped with it (a failed or
        incomplete response's)."""
        key = response_id if response_id in self.running else self.newest.get(delegation_id)
        if key is not None:
            self.running.pop(key, None)
        self._held = False
        if completed or key is None:
            return []
        dropped = [call for call, owner in self.open.items() if owner == key]
        for call in dropped:
            self.forget(call)
        return dropped

    def forget(self, call_id: str) -> None:
        """The call needs no output any more (its response failed, the session ends)."""
        self.open.pop(call_id, None)
        self.charged.discard(call_id)

    def allowance(self, call_id: str) -> int | None:
        """Bytes this call's output may take (None: no limit); every other open call without
        a charged output keeps ``RESERVE`` bytes."""
        items, size = self.budget.left()
        if size is None:
            return None
        others = sum(1 for call in self.open if call != call_id and call not in self.charged)
        if items is not None and items <= others:
            return 0
        return size - RESERVE * others

    def charge(self, call_id: str, size: int) -> None:
        """This call's output, of ``size`` bytes, is decided."""
        self.charged.add(call_id)
        self.budget.charge(size)

    def outputs_sent(self, call_ids: list[str]) -> None:
        for call_id in call_ids:
            self.forget(call_id)
        if call_ids:
            self.owed = True
            self._held = False

    def text_queued(self, size: int) -> None:
        """User text went to the backend: a continuation starts work on it."""
        self.budget.charge(size)
        self.owed = True
        self._held = False

    def due(self) -> Frames | None:
        """The ``response.create`` to send now, if the gate is open and one is owed."""
        if not self.owed or self._held or not self.is_open:
            return None
        event_id = f"{CREATE_PREFIX}{next(self._ids)}"
        return Frames([{"type": "response.create", "event_id": event_id}], "response.create")

    def sent(self, create: Frames) -> None:
        self.owed = False
        self.creates += 1
        self._sent = str(create.messages[0].get("event_id"))

    def refused(self, event_id: str | None) -> bool:
        """``function_call_outputs_required``; True when it names our last create, which is
        owed again once something changes (a new call, an output, a response's end)."""
        if self._sent is None or (event_id is not None and event_id != self._sent):
            return False
        self.refusals += 1
        self._sent = None
        self.owed = True
        self._held = True
        return True
