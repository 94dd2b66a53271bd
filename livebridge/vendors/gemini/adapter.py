"""Gemini ``generate_content`` encoder, and a manual tool loop over ``client.aio.models``.

All calls of one model turn are answered by ONE ``types.Content`` with role ``"user"`` (what the
SDK's own automatic function calling appends) holding one ``function_response`` part per call,
in the calls' order, with the call's name and, when the call had one, its id.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from livebridge.calls.call import Call
from livebridge.calls.dispatch import Dispatcher
from livebridge.calls.fields import field
from livebridge.calls.tools import ToolRegistry

if TYPE_CHECKING:
    from google.genai import types

__all__ = [
    "SYNTHETIC_ID_PREFIX",
    "answer",
    "run_tool_loop",
]


#: Prefix of ids made up for calls the model sent without one; they are never echoed back.
SYNTHETIC_ID_PREFIX = "livebridge-"


async def answer(response_or_calls: Any, dispatcher: Dispatcher, *, turn: int = 0) -> types.Content:
    """Run the function calls of a response (or a list of calls) and return their answers.

    Accepts a ``GenerateContentResponse`` (or its dict form), or an iterable of
    ``FunctionCall`` objects, ``Part``s holding one, or ``{"name", "args", "id"}`` dicts.
    Raises ``ValueError`` when there is no call to answer.
    """
    from google.genai import types

    function_calls = _function_calls(response_or_calls)
    if not function_calls:
        raise ValueError("no function calls to answer")
    calls: list[Call] = []
    echoed: list[bool] = []
    for function_call in function_calls:
        call_id = field(function_call, "id")
        echoed.append(bool(call_id))
        calls.append(
            Call(
                call_id or f"{SYNTHETIC_ID_PREFIX}{uuid.uuid4().hex}",
                field(function_call, "name"),
                field(function_call, "args"),
            )
        )
    outcomes = await dispatcher.run(calls, turn=turn)
    parts = [
        types.Part(
            function_response=types.FunctionResponse(
                id=outcome.call_id if echo else None, name=outcome.name, response=outcome.response
            )
        )
        for outcome, echo in zip(outcomes, echoed, strict=True)
    ]
    return types.Content(role="user", parts=parts)


async def run_tool_loop(
    client: Any,
    *,
    model: str,
    contents: Any,
    tools: ToolRegistry,
    dispatcher: Dispatcher | None = None,
    config: types.GenerateContentConfig | None = None,
    max_rounds: int = 8,
) -> types.GenerateContentResponse:
    """Call ``client.aio.models.generate_content`` until the model stops calling tools.

    The registry's declarations are added to ``config.tools`` and automatic function calling
    is disabled, so every call goes through ``dispatcher``. Returns the first response without
    function calls, or the response of round ``max_rounds`` (whose calls are then unanswered).
    The registry's MCP servers run for the loop (``ToolRegistry.connect_mcp``).
    """
    async with tools.connect_mcp():
        return await _tool_loop(client, model, contents, tools, dispatcher, config, max_rounds)


async def _tool_loop(
    client: Any,
    model: str,
    contents: Any,
    tools: ToolRegistry,
    dispatcher: Dispatcher | None,
    config: types.GenerateContentConfig | None,
    max_rounds: int,
) -> types.GenerateContentResponse:
    from google.genai import types

    from livebridge.vendors.gemini.declarations import declarations as declarations_of

    dispatcher = dispatcher or Dispatcher(tools)
    declarations = [d.model_copy(update={"behavior": None}) for d in declarations_of(tools)]
    config = (config or types.GenerateContentConfig()).model_copy(
        update={
            "tools": [
                *(config.tools or [] if config else []),
                types.Tool(function_declarations=declarations),
            ],
            "automatic_function_calling": types.AutomaticFunctionCallingConfig(disable=True),
        }
    )
    history = _history(contents)
    for turn in range(max_rounds):
        response = await client.aio.models.generate_content(
            model=model, contents=history, config=config
        )
        if not response.function_calls or turn == max_rounds - 1:
            return response  # type: ignore[no-any-return]
        history.append(response.candidates[0].content)
        history.append(await answer(response, dispatcher, turn=turn))
    raise ValueError("max_rounds must be at least 1")


def _function_calls(source: Any) -> list[Any]:
    from google.genai import types

    if isinstance(source, dict) and "candidates" in source:
        source = types.GenerateContentResponse.model_validate(source)
    if isinstance(source, types.GenerateContentResponse):
        return list(source.function_calls or [])
    calls: Iterable[Any] = source
    return [
        item.function_call if isinstance(item, types.Part) else item
        for item in calls
        if not (isinstance(item, types.Part) and item.function_call is None)
    ]


def _history(contents: Any) -> list[Any]:
    from google.genai import types

    if isinstance(contents, str):
        return [types.Content(role="user", parts=[types.Part(text=contents)])]
    if isinstance(contents, types.Content | dict):
        return [contents]
    return list(contents)
