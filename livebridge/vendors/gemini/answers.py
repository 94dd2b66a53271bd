"""Outcomes and streamed items as Gemini Live ``FunctionResponse`` objects.

The wire shape (camelCase, as js-genai and the server's proto3 JSON use it)::

    {"id": "function-call-1", "name": "get_weather", "response": {"output": ...},
     "scheduling": "WHEN_IDLE", "willContinue": true}

Every answer names its function (``gemini-3.8-live-extended-thinking`` reads an unnamed one as a
failed call, roomkit-live/roomkit#42). A call that came without an id (Vertex AI) is answered
without one: the service matches it by name, in call order. BLOCKING answers never carry
``scheduling`` or ``willContinue``. NON_BLOCKING answers carry the per-result ``scheduling`` when
the handler chose one, else the tool's default, else nothing (the server then uses
``WHEN_IDLE``); a value the backend refuses (``ModelProfile.schedulings``) is left out. A
streaming tool sends each item with ``willContinue: true`` and ends with ``willContinue: false``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from livebridge.calls.call import SCHEDULINGS, AnswerEncoder, Behavior, Outcome, Partial, Scheduling

if TYPE_CHECKING:
    from google.genai import types

_EVERY_SCHEDULING: frozenset[Scheduling] = frozenset(SCHEDULINGS)


def encode(
    answer: Outcome | Partial,
    *,
    behavior: Behavior,
    scheduling: Scheduling | None = None,
    streaming: bool = False,
    anonymous: bool = False,
    schedulings: frozenset[Scheduling] = _EVERY_SCHEDULING,
) -> dict[str, Any]:
    """One ``FunctionResponse`` wire dict for a final answer or a streamed item.

    ``scheduling`` is the tool's default; a value carried by ``answer`` overrides it; only
    ``schedulings`` are sent. ``anonymous``: the call came without an id (its ``call_id`` is
    livebridge's own key), so the answer carries none. Raises ValueError for a streamed item of
    a BLOCKING or non-streaming call.
    """
    response: dict[str, Any] = (
        {"name": answer.name, "response": answer.response}
        if anonymous
        else {"id": answer.call_id, "name": answer.name, "response": answer.response}
    )
    item = isinstance(answer, Partial)
    if behavior == "BLOCKING":
        if item:
            raise ValueError(f"call {answer.call_id}: a BLOCKING call cannot stream items")
        return response
    if item and not streaming:
        raise ValueError(f"call {answer.call_id}: only a streaming tool sends items")
    chosen = answer.scheduling or scheduling
    if chosen is not None and chosen in schedulings:
        response["scheduling"] = chosen
    if streaming:
        response["willContinue"] = item
    return response


def encoder(schedulings: frozenset[Scheduling]) -> AnswerEncoder:
    """``encode`` for a backend that takes only ``schedulings`` (``ModelProfile.schedulings``)."""
    if schedulings == _EVERY_SCHEDULING:
        return encode
    return partial(encode, schedulings=schedulings)


def tool_response(function_responses: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The complete client message carrying ``function_responses``: the one place it is built."""
    return {"toolResponse": {"functionResponses": list(function_responses)}}


def to_sdk(function_responses: Sequence[Mapping[str, Any]]) -> list[types.FunctionResponse]:
    """The same answers as SDK objects, for ``AsyncSession.send_tool_response``.

    Use ``send_tool_response``: the SDK's older ``send(input=...)`` path drops ``scheduling``
    and ``willContinue``.
    """
    from google.genai import types

    converted: list[types.FunctionResponse] = []
    for response in function_responses:
        scheduling = response.get("scheduling")
        if scheduling is not None:
            scheduling = types.FunctionResponseScheduling(scheduling)
        converted.append(
            types.FunctionResponse(
                id=response.get("id"),
                name=response["name"],
                response=response["response"],
                scheduling=scheduling,
                will_continue=response.get("willContinue"),
            )
        )
    return converted
