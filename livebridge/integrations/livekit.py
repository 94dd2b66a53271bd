"""LiveKit Agents: every tool of a registry as a raw function tool for ``Agent(tools=...)``.

LiveKit parses a call's arguments, then calls the tool; what the tool returns is the output,
and a ``livekit.agents.llm.ToolError`` raised by it is an error output (``is_error``). Here each
call runs through one ``Dispatcher``: a raising tool, a timeout (LiveKit has none per call) and
a call past the limits answer livebridge's structured error, a call the model re-issues while
the first runs runs once, and observers see every call. LiveKit does not cancel a tool when
the user interrupts the speech that issued it while its response is still generating (it
waits for the tool, then answers the call the server cancelled): here the call is cancelled
then (``SpeechHandle.wait_if_not_interrupted``, ``RunContext.wait_for_playout``) and settles
``cancelled``, as it does when LiveKit cancels the tool's task.

The calls of one model response are one turn (twins, ``max_calls_per_turn``): LiveKit runs a
response's calls under its ``SpeechHandle`` (``RunContext.speech_handle``), and answers them
with the next step of that same handle (``num_steps`` goes up by one), so a handle's id and
step name a response. A call with no speech handle (LiveKit's executor run on its own) is a
turn of its own.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from livebridge.calls.call import Call, Outcome
from livebridge.calls.dispatch import Dispatcher
from livebridge.calls.observers import Observer
from livebridge.calls.payloads import json_text
from livebridge.calls.policy import CallPolicy
from livebridge.calls.tools import ToolRegistry
from livebridge.errors import UsageError

__all__ = ["function_tools"]

#: How many model responses the turn numbering remembers (as many as ``submit()`` keeps).
_RESPONSES_KEPT = 64


class _Turns:
    """Numbers model responses: a speech handle's id and its step name one."""

    def __init__(self) -> None:
        self._numbers: OrderedDict[tuple[str, int], int] = OrderedDict()
        self._next = 1

    def of(self, speech: Any) -> int | None:
        speech_id = getattr(speech, "id", None)
        step = getattr(speech, "num_steps", None)
        if not isinstance(speech_id, str) or not isinstance(step, int):
            return None  # a LiveKit without them: the call is a turn of its own
        key = (speech_id, step)
        number = self._numbers.get(key)
        if number is None:
            number, self._next = self._next, self._next + 1
            self._numbers[key] = number
            if len(self._numbers) > _RESPONSES_KEPT:
                self._numbers.popitem(last=False)
        return number


def function_tools(
    registry: ToolRegistry,
    *,
    policy: CallPolicy | None = None,
    observers: Iterable[Observer] = (),
) -> list[Any]:
    """One raw function tool per tool of ``registry``, sharing one ``Dispatcher``: make them
    once per conversation (an ``AgentSession``), as a session would own one. An answer is
    livebridge's JSON: ``{"output": ...}``, or ``{"error": {...}}`` as LiveKit's error output.
    """
    try:
        from livekit.agents import RunContext
        from livekit.agents.llm import ToolError, function_tool
    except ImportError as exc:
        raise UsageError(
            "livebridge.integrations.livekit needs LiveKit Agents: "
            "pip install 'livebridge-voice[livekit]'"
        ) from exc
    dispatcher = Dispatcher(registry, policy=policy, observers=observers)
    made: list[Any] = []
    turns = _Turns()
    calls = 0

    def invoker(name: str) -> Any:
        async def invoke(raw_arguments: dict[str, Any], context: Any = None) -> str:
            nonlocal calls
            calls += 1
            function_call = getattr(context, "function_call", None)
            call_id = getattr(function_call, "call_id", None) or f"{name}-{calls}"
            call = Call(call_id, name, raw_arguments)
            speech = getattr(context, "speech_handle", None)
            if speech is None:  # no response to name: the call is a turn of its own
                outcome = await dispatcher.submit(call)
            else:  # read now: the step moves on once every call of the response is answered
                outcome = await _unless_interrupted(dispatcher, call, context, turns.of(speech))
            answer = json_text(outcome.response)
            if "error" in outcome.response:
                raise ToolError(answer)
            return answer

        # LiveKit reads the parameters' types to pass its RunContext (``get_type_hints``).
        invoke.__annotations__ = {"raw_arguments": dict, "context": RunContext, "return": str}
        return invoke

    for tool in registry:
        schema = {
            "name": tool.name,
            "description": tool.description or "",
            "parameters": tool.parameters_json_schema,
        }
        made.append(function_tool(invoker(tool.name), raw_schema=schema))
    return made


async def _unless_interrupted(
    dispatcher: Dispatcher, call: Call, context: Any, turn: int | None
) -> Outcome:
    """The call's outcome; the call is cancelled (settled ``cancelled``) if the speech that
    issued it is interrupted while its generation still runs: the server cancels that
    response's calls. Once the generation is done the calls are owed answers, and a later
    barge-in (LiveKit interrupts the speech then too) leaves them running. A call waiting on
    an identical one's answer keeps waiting for it."""
    speech = context.speech_handle
    submitted = asyncio.ensure_future(dispatcher.submit(call, turn=turn))
    played = asyncio.ensure_future(context.wait_for_playout())  # the generation is done
    # Read when the generation ends, not when this task wakes: LiveKit marks an interrupted
    # generation done right after the interruption, maybe before this task runs again.
    owed: list[bool] = []
    played.add_done_callback(lambda _: owed.append(not speech.interrupted))
    watch = asyncio.ensure_future(speech.wait_if_not_interrupted([played]))
    try:
        await asyncio.wait((submitted, watch), return_when=asyncio.FIRST_COMPLETED)
        if not submitted.done() and speech.interrupted and owed != [True]:
            dispatcher.cancel(call.id)
        return await submitted
    except asyncio.CancelledError:  # LiveKit cancelled the tool: so is the call
        submitted.cancel()
        raise
    finally:
        watch.cancel()
        played.cancel()
        if played.done() and not played.cancelled():
            played.exception()  # no generation to wait for: nothing to watch
