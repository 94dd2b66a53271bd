"""What an emulator keeps of its past, held to a byte budget (no I/O).

An emulator that serves for hours keeps its report (transcript entries, finished connections,
resumption handles, violations) within ``Retention.max_bytes``. ``footprint`` measures what one
kept item holds in memory, and ``Ledger`` charges each item as it is kept and names the oldest
to let go once the total passes the budget: detail first (transcript entries, finished
connections, handles), then, only when no detail is left, the summaries (violations).
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass, field, is_dataclass
from types import BuiltinFunctionType, FunctionType, ModuleType
from typing import Any

import msgspec

#: What the ledger and the list holding an item spend on it besides the item: a tuple, a deque
#: slot and a list slot.
ENTRY_OVERHEAD = sys.getsizeof((0, None)) + 2 * 8

_ATOMS = (str, bytes, bytearray, int, float, complex, bool, type(None))
_SHARED_CODE = (type, ModuleType, FunctionType, BuiltinFunctionType)


def _slots(kind: type) -> list[str]:
    names: list[str] = []
    for klass in kind.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names.extend([slots] if isinstance(slots, str) else slots)
    return names


def _walked(value: object) -> bool:
    """Whether ``footprint`` follows what ``value`` refers to: livebridge's own objects and
    dataclasses; anything else (an asyncio lock, a bound method) counts for itself alone."""
    kind = type(value)
    return kind.__module__.startswith("livebridge.") or is_dataclass(kind)


def footprint(root: object, *, exclude: Collection[object] = ()) -> int:
    """The bytes ``root`` holds (``sys.getsizeof``): itself and, each counted once, the
    containers, structs and livebridge objects it refers to. Classes, modules and functions
    are shared code and not counted; ``exclude``: objects ``root`` shares with others (the
    emulator's state), counted nowhere."""
    seen = {id(value) for value in exclude}
    stack: list[object] = [root]
    total = 0
    while stack:
        value = stack.pop()
        if id(value) in seen or isinstance(value, _SHARED_CODE):
            continue
        seen.add(id(value))
        total += sys.getsizeof(value)
        if isinstance(value, _ATOMS):
            continue
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, (list, tuple, set, frozenset, deque)):
            stack.extend(value)
        elif isinstance(value, msgspec.Struct):
            stack.extend(getattr(value, name) for name in value.__struct_fields__)
        elif _walked(value):
            attributes = getattr(value, "__dict__", None)
            if attributes is not None:
                stack.append(attributes)
            stack.extend(
                getattr(value, name) for name in _slots(type(value)) if hasattr(value, name)
            )
        elif hasattr(value, "__dict__"):
            total += sys.getsizeof(value.__dict__)
    return total


@dataclass(slots=True)
class Ledger:
    """The bytes each kept item costs, oldest first, within ``budget``.

    ``charge`` returns what to let go once the total passes the budget: the oldest detail,
    then the oldest summaries, until a quarter of the budget is free again (so letting go is
    done in batches, not on every item).
    """

    budget: int
    kept: int = 0
    _detail: deque[tuple[int, Any]] = field(default_factory=deque)
    _summary: deque[tuple[int, Any]] = field(default_factory=deque)

    def charge(self, item: object, size: int, *, summary: bool = False) -> list[Any]:
        """Keep ``item`` at ``size`` bytes; the items to let go, oldest first."""
        size += ENTRY_OVERHEAD
        (self._summary if summary else self._detail).append((size, item))
        self.kept += size
        if self.kept <= self.budget:
            return []
        target = self.budget - self.budget // 4
        gone: list[Any] = []
        for kept in (self._detail, self._summary):
            while kept and self.kept > target:
                size, old = kept.popleft()
                self.kept -= size
                gone.append(old)
        return gone

    def __len__(self) -> int:
        return len(self._detail) + len(self._summary)
