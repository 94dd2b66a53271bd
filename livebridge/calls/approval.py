"""Asking the app whether a call may run: the ``approve`` option of a tool.

The callback is awaited before the handler starts, outside the call's timeout and before its
concurrency slots and journal entry are taken (a person may take a minute). It answers ``True``
(run it), ``False`` or a reason string (denied: the handler never runs). No answer within the
tool's ``approval_timeout``, or a callback that raises, is a denial too: a call nobody allowed
does not run.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

import anyio

log = logging.getLogger("livebridge.calls.dispatch")


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What the approval callback is shown: the tool, its validated arguments, the call's id
    and the conversation it belongs to (the store's conversation id, else the session's id)."""

    name: str
    arguments: dict[str, Any]
    call_id: str
    conversation: str | None


#: ``async def approve(request: ApprovalRequest) -> bool | str`` (a plain function works too).
Approver: TypeAlias = Callable[[ApprovalRequest], "Awaitable[bool | str] | bool | str"]


async def ask(approve: Approver, request: ApprovalRequest, seconds: float) -> str | None:
    """None when the call may run, else the reason it may not (the model reads it)."""
    answer: object = None
    with anyio.move_on_after(seconds):
        try:
            answer = approve(request)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as exc:
            names = (request.name, request.call_id)
            log.error("the approval of %s (call %s) raised", *names, exc_info=exc)
            return f"The approval check failed ({type(exc).__name__}); the call was not run."
        if answer is True:
            return None
        if isinstance(answer, str) and answer:
            return answer
        if answer is False or isinstance(answer, str):
            return "The call was not approved."
        log.error("the approval of %s returned %r, not a bool or a reason", request.name, answer)
        return "The approval check gave no answer; the call was not run."
    return f"No approval came within {seconds:g} s; the call was not run."
