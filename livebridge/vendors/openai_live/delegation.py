"""Client delegation: the app answers each ``session.delegation.created`` itself.

The app's ``delegate(delegation)`` (``SessionOptions.delegate``) runs as a call of the session
(the ledger and the dispatcher give it one fate, ``CallPolicy.timeout`` bounds it), named
``DELEGATE``; its reply is spoken commentary (``session.commentary.append``) carrying the
delegation's id, cut into appends of at most ``MAX_APPEND`` characters (the service takes 500
tokens per append; 1,900 characters were seen refused). A delegate that raises, or outlives its
timeout, still gets a short spoken apology: a delegation never goes unanswered.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from livebridge.calls.tools import ToolRegistry

#: The session's name for the app's delegate, as a call.
DELEGATE: Final = "livebridge_delegation"
#: Characters per append: under 450 tokens at four characters a token.
MAX_APPEND: Final = 1_800
APOLOGY: Final = "Sorry, I could not finish that. Please ask me again."
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Delegation:
    """What the service says of a delegation: its id and its place on the session timeline
    (the task itself is in the transcripts, which the app keeps)."""

    id: str
    offset_ms: int | None = None


def registry(delegate: Callable[[Delegation], Any]) -> ToolRegistry:
    """A registry whose one tool runs ``delegate`` and returns the whole reply's text."""
    tools = ToolRegistry()

    async def livebridge_delegation(delegation_id: str, offset_ms: int | None = None) -> str:
        """The app's answer to one delegation."""
        reply = delegate(Delegation(delegation_id, offset_ms))
        if isinstance(reply, Awaitable):
            reply = await reply
        if isinstance(reply, str):
            return reply
        parts: list[str] = []
        async for part in reply:  # an async iterator of text
            parts.append(str(part))
        return "".join(parts)

    tools.add(livebridge_delegation, name=DELEGATE)
    return tools


def appends(delegation_id: str, text: str) -> list[dict[str, Any]]:
    """``session.commentary.append`` events carrying ``text``, at most ``MAX_APPEND``
    characters each, cut at sentence ends where one falls in reach."""
    pieces: list[str] = []
    current = ""
    for sentence in _SENTENCE.split(text.strip()) or [""]:
        while len(sentence) > MAX_APPEND:
            head, sentence = sentence[:MAX_APPEND], sentence[MAX_APPEND:]
            if current:
                pieces.append(current)
                current = ""
            pieces.append(head)
        joined = f"{current} {sentence}" if current else sentence
        if len(joined) > MAX_APPEND:
            pieces.append(current)
            current = sentence
        else:
            current = joined
    if current or not pieces:
        pieces.append(current or APOLOGY)
    return [
        {
            "type": "session.commentary.append",
            "event_id": f"livebridge_append_{next(_ids)}",
            "delegation_id": delegation_id,
            "content": piece,
        }
        for piece in pieces
    ]
