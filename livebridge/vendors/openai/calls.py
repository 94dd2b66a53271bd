"""The function calls of OpenAI Realtime responses that are not done yet, and the call ids that
already have a fate: the gate every call passes once, whatever the server repeats or omits.

Sans-I/O. A call is noted from each event that names it (``response.output_item.added`` /
``.done``, ``response.function_call_arguments.done``, the output of ``response.done``) and taken
when its response is done: by the response's id, or, for a ``response.done`` without one, as the
response in progress, and always by the call ids its output lists. A call taken, or given up
(a lost connection, a close), is remembered by id with a digest of its arguments; a later
delivery of that id is a *repeat*, never a second call: the same arguments again are ignored, other
arguments are the server reusing an id (a protocol error the protocol answers as such).

Bounded, since a response that never finishes would otherwise hold its calls for the whole
session: at most ``max_response_chars`` characters of arguments per response and
``max_held_chars`` over all unfinished responses. A call whose arguments would pass either bound
has them dropped and fails alone (``UnreadableArguments`` saying which bound), and at most
``max_calls`` calls are held: one past it is handed back at once to be withdrawn.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from livebridge.calls.call import UnreadableArguments
from livebridge.calls.fields import parse_arguments
from livebridge.vendors.openai.wire import Item

#: Characters of arguments the calls of one response may carry (the model writes a few hundred).
MAX_RESPONSE_ARGUMENT_CHARS = 1 << 20
#: Characters of arguments held over every response that is not done yet.
MAX_HELD_ARGUMENT_CHARS = 4 << 20
#: Calls held over every response that is not done yet.
MAX_HELD_CALLS = 1024
#: Call ids remembered with their fate (the ledger remembers as many ended calls).
KNOWN_CALLS = 4096


@dataclass(slots=True)
class HeldCall:
    """A function call seen in a response that is not done yet."""

    call_id: str
    name: str | None
    response_id: str
    index: int
    arguments: str | None = None
    digest: int = 0  # of the newest arguments seen, kept when they are dropped
    unreadable: str | None = None  # why its arguments were dropped (a bound)

    @property
    def size(self) -> int:
        return len(self.arguments) if self.arguments else 0

    def args(self) -> Any:
        """What the call carries as ``Call.args``: its decoded arguments, or why it cannot."""
        if self.unreadable is not None:
            return UnreadableArguments(self.unreadable)
        return parse_arguments(self.arguments or "")


class Repeat(NamedTuple):
    """A call id delivered again after it was given its fate."""

    item: Item
    same: bool  # the same arguments (or none): a repeat; else the id was reused


class ResponseCalls:
    """See the module docstring."""

    __slots__ = (
        "_calls",
        "_held",
        "_known",
        "_per_response",
        "max_calls",
        "max_held_chars",
        "max_response_chars",
    )

    def __init__(
        self,
        *,
        max_response_chars: int = MAX_RESPONSE_ARGUMENT_CHARS,
        max_held_chars: int = MAX_HELD_ARGUMENT_CHARS,
        max_calls: int = MAX_HELD_CALLS,
    ) -> None:
        self.max_response_chars = max_response_chars
        self.max_held_chars = max_held_chars
        self.max_calls = max_calls
        self._calls: dict[str, HeldCall] = {}  # by call id, in arrival order
        self._per_response: dict[str, int] = {}  # characters held per response id
        self._held = 0
        self._known: OrderedDict[str, int] = OrderedDict()  # call id -> digest, newest last

    @property
    def held_chars(self) -> int:
        """Characters of arguments held now (at most ``max_held_chars``)."""
        return self._held

    def __len__(self) -> int:
        return len(self._calls)

    def note(
        self,
        response_id: str,
        call_id: str | None,
        name: str | None,
        arguments: str | None,
        index: int | None,
    ) -> HeldCall | None:
        """Merge what one event says about a call (``output_item.added`` has empty arguments,
        the ``.done`` events the whole string: the newest non-empty wins). Returns a new call
        that cannot be held (``max_calls``), to be withdrawn now; it is remembered."""
        if not call_id or call_id in self._known:
            return None
        call = self._calls.get(call_id)
        if call is None:
            call = HeldCall(
                call_id, name, response_id, len(self._calls) if index is None else index
            )
            if len(self._calls) >= self.max_calls:
                call.digest = hash(arguments or "")
                self._remember(call)
                return call
            self._calls[call_id] = call
        elif name:
            call.name = name
        if arguments:
            self._hold(call, arguments)
        return None

    def take(
        self, response_id: str | None, output: Iterable[Item]
    ) -> tuple[list[HeldCall], list[Repeat]]:
        """The calls of a response that is done (``response_id``: its id, or the one in
        progress), in output order, each now remembered; and the ids it repeats."""
        repeats: list[Repeat] = []
        listed: set[str] = set()
        for index, item in enumerate(output):
            call_id = item.call_id
            if item.type != "function_call" or not call_id:
                continue
            known = self._known.get(call_id)
            if known is not None:
                same = not item.arguments or hash(item.arguments) == known
                repeats.append(Repeat(item, same))
                continue
            self.note(response_id or "", call_id, item.name, item.arguments, index)
            listed.add(call_id)
        taken = [
            call
            for call in self._calls.values()
            if call.call_id in listed
            or (response_id is not None and call.response_id == response_id)
        ]
        for call in taken:
            self._release(call)
        taken.sort(key=lambda call: call.index)
        return taken, repeats

    def drop_all(self) -> list[HeldCall]:
        """Every call held (its response will never be done: the connection ended), each now
        remembered."""
        calls = list(self._calls.values())
        for call in calls:
            self._release(call)
        return calls

    # -- internals ------------------------------------------------------------------------

    def _hold(self, call: HeldCall, arguments: str) -> None:
        call.digest = hash(arguments)
        if call.unreadable is not None or arguments is call.arguments:
            return
        old, new = call.size, len(arguments)
        response = self._per_response.get(call.response_id, 0) - old
        held = self._held - old
        if response + new > self.max_response_chars:
            limit = f"the calls of one response may carry {self.max_response_chars:,} at most"
        elif held + new > self.max_held_chars:
            limit = (
                f"livebridge holds {self.max_held_chars:,} at most for responses that are not "
                "done yet"
            )
        else:
            self._per_response[call.response_id] = response + new
            self._held = held + new
            call.arguments = arguments
            return
        call.unreadable = f"the arguments are {new:,} characters of JSON, and {limit}"
        call.arguments = None
        self._per_response[call.response_id] = response
        self._held = held

    def _release(self, call: HeldCall) -> None:
        del self._calls[call.call_id]
        size = call.size
        self._held -= size
        left = self._per_response.get(call.response_id, 0) - size
        if left > 0:
            self._per_response[call.response_id] = left
        else:
            self._per_response.pop(call.response_id, None)
        self._remember(call)

    def _remember(self, call: HeldCall) -> None:
        known = self._known
        known[call.call_id] = call.digest
        known.move_to_end(call.call_id)
        while len(known) > KNOWN_CALLS:
            known.popitem(last=False)
