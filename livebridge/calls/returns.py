"""What a handler's end is answered with: its value, its stream, or how it failed, as an Outcome.

The dispatcher runs a handler; these functions turn what came back into the call's one
``Outcome`` (a value bounded by ``max_result_bytes``, a streamed item delivered as a
``Partial``, an exception, a timeout or a cancellation), following the contract table.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from livebridge.calls import outcomes, payloads
from livebridge.calls.call import Call, Outcome, Partial, Result
from livebridge.calls.plans import Pending
from livebridge.calls.tools import Tool
from livebridge.errors import UnserializableResult

log = logging.getLogger("livebridge.calls.dispatch")
_encode = msgspec.json.Encoder().encode
_to_builtins = msgspec.to_builtins


@dataclass(frozen=True, slots=True)
class Streamed:
    """A stream whose items were all sent as partials: what they weighed together, so that the
    call's ``result_bytes`` is what was sent for it, not the empty end."""

    result_bytes: int
    truncated: bool


def success(call: Call, tool: Tool, value: Any, latency: float, max_result_bytes: int) -> Outcome:
    """A handler returned ``value`` (a ``Result`` may carry its own scheduling).

    A value that encodes, fits and holds no ``null`` is answered here as ``payloads.output``
    would answer it, without that call (once per answer: benchmarks/PROFILE.md, the tool
    core); anything else (a value to cut, a NaN, one that does not encode) takes it.
    """
    scheduling = tool.scheduling
    if isinstance(value, Streamed):
        return Outcome(
            call.id,
            tool.name,
            "ok",
            {},
            latency,
            value.result_bytes,
            value.truncated,
            scheduling=scheduling,
        )
    if isinstance(value, Result):
        value, scheduling = value.value, value.scheduling or scheduling
    try:
        plain = _to_builtins(value, str_keys=True)
        response = {"output": plain}
        encoded = _encode(response)
    except Exception:  # ``payloads.output`` says why, below
        pass
    else:  # (a ``null`` may stand for a NaN, which has no JSON form: ``output`` looks)
        size = len(encoded)
        if size <= max_result_bytes and (plain is None or b"null" not in encoded):
            return Outcome(
                call.id, tool.name, "ok", response, latency, size, False, None, None, scheduling
            )
    try:
        payload = payloads.output(value, max_result_bytes)
    except UnserializableResult as exc:
        return outcomes.raised(
            call, tool.name, exc, latency, expose=tool.expose_errors, sched=tool.scheduling
        )
    return Outcome(
        call.id,
        tool.name,
        "ok",
        payload.response,
        latency,
        payload.result_bytes,
        payload.truncated,
        payload.original_bytes,
        None,
        scheduling,
    )


def ended(
    pending: Pending, tool: Tool, exc: Exception | None, latency: float, timeout: float
) -> Outcome:
    """A handler that ended without a result: cancelled, timed out (after ``timeout`` seconds,
    the policy's unless the tool has its own), or it raised ``exc`` (in a cancelled scope,
    whatever it raised is the cancellation's)."""
    call, scope = pending.call, pending.scope
    if exc is None or (scope is not None and scope.cancel_called):
        if pending.cancel_requested:
            return outcomes.cancelled(call, latency)
        seconds = tool.timeout or timeout
        return outcomes.timeout(call, tool.name, seconds, latency, tool.scheduling)
    return outcomes.raised(
        call, tool.name, exc, latency, expose=tool.expose_errors, sched=tool.scheduling
    )


async def stream(
    call: Call,
    tool: Tool,
    kwargs: dict[str, Any],
    on_partial: Callable[[Partial], None] | None,
    max_result_bytes: int,
) -> Any:
    """Run an async-generator handler: each item goes to ``on_partial`` as it comes (then the
    value is ``Streamed``), or, without it, the items are collected into one list."""
    items: list[Any] = []
    sent, truncated = 0, False
    generator = tool.handler(**kwargs)
    try:
        async for item in generator:
            if on_partial is None:
                items.append(item.value if isinstance(item, Result) else item)
                continue
            value, scheduling = item, tool.scheduling
            if isinstance(item, Result):
                value, scheduling = item.value, item.scheduling or scheduling
            payload = payloads.output(value, max_result_bytes)
            sent, truncated = sent + payload.result_bytes, truncated or payload.truncated
            deliver(on_partial, Partial(call.id, tool.name, payload.response, scheduling))
    finally:
        await generator.aclose()
    return items if on_partial is None else Streamed(sent, truncated)


def deliver(callback: Callable[[Any], None], item: Any) -> None:
    """Hand ``item`` to the owner's callback; a callback that fails is logged, never raised."""
    try:
        callback(item)
    except Exception:
        log.exception("callback %r failed on %r", callback, item)
