"""Conversations that outlive a browser connection (and, with ``--redis``, a worker).

A browser opens ``/ws?conversation=ID``; the session it gets owns conversation ID in the store
(``livebridge.store``): a browser that reconnects with the same ID continues the conversation,
on this worker or, when the workers share a Redis (``--redis``), on any of them.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import TypeVar
from urllib.parse import parse_qs, urlsplit

import anyio

from livebridge import ConversationBusyError
from livebridge.observe import Event, LeaseChanged

__all__ = ["LeaseWatch", "conversation_id", "wait_for_lease"]

T = TypeVar("T")
_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")


class LeaseWatch:
    """An observer that notes whether the session resumed a stored conversation."""

    def __init__(self) -> None:
        self.resumed = False

    def on_event(self, event: Event) -> None:
        if isinstance(event, LeaseChanged) and event.event == "resumed":
            self.resumed = True


def conversation_id(path: str) -> str | None:
    """The ``conversation`` query parameter of ``/ws``, if any; ValueError when malformed."""
    values = parse_qs(urlsplit(path).query).get("conversation")
    if not values:
        return None
    if not _ID.fullmatch(values[-1]):
        raise ValueError(
            "The conversation id must be 1 to 128 letters, digits or . _ : - characters."
        )
    return values[-1]


@asynccontextmanager
async def wait_for_lease(
    connect: Callable[[], AbstractAsyncContextManager[T]], patience: float
) -> AsyncIterator[T]:
    """Enter ``connect()``, retrying while another worker still holds the conversation (the
    browser reconnected before its old session finished), for up to ``patience`` seconds."""
    deadline = time.monotonic() + patience
    async with AsyncExitStack() as stack:
        while True:
            try:
                value = await stack.enter_async_context(connect())
                break
            except ConversationBusyError as busy:
                if time.monotonic() + busy.retry_after > deadline:
                    raise
                await anyio.sleep(max(busy.retry_after, 0.05))
        yield value
