"""Which OpenAI Realtime response is in progress, and the one ``response.create`` each set of tool
outputs is owed. Sans-I/O.

Adding outputs does not make the model go on: a response must start that has them in its input,
and a response's input is the conversation as it stood when the response began. So the
continuation is owed from the moment outputs leave until a response starts that has seen every
one of them:

- one the server starts by itself (turn detection, or after the outputs) *after* it acknowledged
  each output (``conversation.item.added``; the server sends its events in order, so an
  acknowledgement read before ``response.created`` was added before the response began). That
  response answers them, and nothing is sent. One that started before (user speech detected while
  the handlers ran) has not seen them: the continuation stays owed until it is done.
- ours: ``response.create`` is sent once no response is in progress, with an ``event_id``. If
  the server refuses it with ``conversation_already_has_active_response`` naming that id (a
  response began that had not been read yet), it is owed again and sent once that response is
  done, unless that response had already seen every output.

So each set of outputs gets exactly one continuation: one ``response.create`` accepted, or one
response the server started after the outputs were in.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from livebridge.protocol.transport import Frames

#: The ``event_id`` prefix of the continuations livebridge sends (the server echoes it in errors).
CREATE_PREFIX = "livebridge_continue_"


class Continuation:
    """See the module docstring."""

    __slots__ = ("_ids", "_saw", "_sent", "_unacknowledged", "active", "owed")

    def __init__(self) -> None:
        self.owed = False  # outputs went out and no response has seen them yet
        self.active: str | None = None  # the response in progress, if any
        self._saw = False  # the response in progress began after every output was in
        self._unacknowledged: set[str] = set()  # outputs sent, not yet acknowledged
        self._sent: str | None = None  # the event_id of our last response.create
        self._ids = itertools.count(1)

    def reset(self) -> None:
        """A new connection: a new conversation, which owes nothing."""
        self.owed = False
        self.active = None
        self._saw = False
        self._unacknowledged.clear()
        self._sent = None

    def outputs_sent(self, call_ids: Iterable[str]) -> None:
        """Outputs are leaving (owed from now: the server may start a response meanwhile)."""
        self._unacknowledged.update(call_ids)
        self.owed = True

    def acknowledged(self, call_id: str | None) -> None:
        """``conversation.item.added`` of a ``function_call_output``: it is in the conversation."""
        self._unacknowledged.discard(call_id or "")

    def started(self, response_id: str | None) -> bool:
        """``response.created``; True when it answers the owed outputs (it began after every
        one was in), so that no ``response.create`` follows."""
        self.active = response_id or self.active or ""
        self._saw = not self._unacknowledged
        if self.owed and self._saw:
            self.owed = False
            return True
        return False

    def ended(self, response_id: str | None) -> None:
        """``response.done`` (without an id: the response in progress)."""
        if response_id is None or response_id == self.active:
            self.active = None
        # Sent while none was in progress, our create was refused (the error comes first) or
        # started a response by now: no later error is about it.
        self._sent = None
        if not self.owed:  # those outputs had their continuation: forget which were in
            self._unacknowledged.clear()

    def refused(self, event_id: str | None) -> bool:
        """``conversation_already_has_active_response``; True when it refused our create,
        which is then owed again unless the response in progress has seen every output. An
        error naming no event is taken as ours until the next ``response.done``."""
        ours = self._sent is not None and (event_id is None or event_id == self._sent)
        if not ours:
            return False
        self._sent = None
        if not self._saw:
            self.owed = True
        return True

    def due(self) -> Frames | None:
        """The ``response.create`` to send now, if one is owed and no response is in progress."""
        if not self.owed or self.active is not None:
            return None
        message: dict[str, Any] = {"type": "response.create", "event_id": self._next_id()}
        return Frames([message], "response.create")

    def sent(self, create: Frames) -> None:
        """Our ``response.create`` left."""
        self.owed = False
        self._sent = str(create.messages[0].get("event_id"))

    def _next_id(self) -> str:
        return f"{CREATE_PREFIX}{next(self._ids)}"
