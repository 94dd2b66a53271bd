"""What an attached session (GPT-Live's sideband) reads from the short replay it gets on
attach, before it runs anything. Sans-I/O.

A sideband first gets recent events of the running session, then ``session.started``. Among
them may be calls that were answered before the attach: running them again would be the
"tool run twice" OpenAI warns of. The replay shows no client event, so an answer is read from
what followed it:

- a **continuation**: a second ``response.created`` under one delegation. The service refuses
  ``response.create`` while any call of the session is open, so every call seen before a
  continuation had its output;
- a **failed or incomplete** response: the service dropped its calls (none is owed an output).

Those calls are left out of what the protocol reads; every other call of the replay is open
and is answered once. ``declared_tools`` compares the session's declared functions with the
registry: the session was started elsewhere, with its own ``delegation.responses.tools``.
"""

from __future__ import annotations

from collections.abc import Iterable

from livebridge.vendors.openai_live import wire


def settled_calls(replay: Iterable[wire.ServerEvent]) -> set[str]:
    """The call ids of ``replay`` that need no output from this connection."""
    seen: list[str] = []  # calls in arrival order, not yet known settled
    owner: dict[str, str | None] = {}  # call id -> its response (the delegation's newest)
    newest: dict[str | None, str | None] = {}  # delegation -> its newest response
    responses: set[str | None] = set()  # delegations that had a response
    settled: set[str] = set()
    for message in replay:
        event = message.event
        if message.type != "response.event" or event is None:
            continue
        delegation = message.delegation_id
        response = event.response.id if event.response else None
        if event.type == "response.created":
            if delegation in responses:  # a continuation: every earlier call was answered
                settled.update(seen)
                seen.clear()
            responses.add(delegation)
            newest[delegation] = response
        elif event.type == "response.output_item.done":
            call_id = _call_of(message)
            status = event.item.status if event.item else None
            if call_id and status in (None, "completed") and call_id not in settled:
                seen.append(call_id)
                owner[call_id] = newest.get(delegation)
        elif event.type in ("response.failed", "response.incomplete"):
            ended = response if response is not None else newest.get(delegation)
            dropped = [call for call in seen if owner.get(call) == ended]
            settled.update(dropped)
            seen[:] = [call for call in seen if call not in dropped]
    return settled


def without(replay: list[wire.ServerEvent], settled: set[str]) -> list[wire.ServerEvent]:
    """``replay`` less the announcements of ``settled`` calls."""
    return [message for message in replay if _call_of(message) not in settled]


def _call_of(message: wire.ServerEvent) -> str | None:
    event = message.event
    if message.type != "response.event" or event is None or event.item is None:
        return None
    if event.type != "response.output_item.done" or event.item.type != "function_call":
        return None
    return event.item.call_id


def declared_tools(session: wire.Session | None) -> set[str] | None:
    """The function names the session declared for its Responses backend; None when the
    session delegates otherwise (or did not say)."""
    if session is None or session.delegation is None:
        return None
    delegation = session.delegation
    if delegation.type != "responses":
        return None
    tools = (delegation.responses.tools if delegation.responses else None) or []
    return {tool.name for tool in tools if tool.type == "function" and tool.name}
