"""``GeminiLiveProtocol`` says when an irreversible call's turn stands or is withdrawn.

Without sockets: a ``toolCall`` holding an irreversible tool's call is run unconfirmed
(``RunCalls.confirmed`` False); ``generationComplete``/``turnComplete`` confirm it, and
``interrupted`` or new input from the app withdraw it (``ConfirmCalls``). Calls of other tools
never wait.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from livebridge import ToolRegistry
from livebridge.calls.call import Call
from livebridge.protocol.actions import ConfirmCalls, RunCalls
from livebridge.protocol.transport import Signal, Text
from livebridge.vendors.gemini import wire
from livebridge.vendors.gemini.protocol import GeminiLiveProtocol
from tests.vendors.protocol_helpers import of


def message(**fields: Any) -> wire.ServerMessage:
    return wire.decode_server(msgspec.json.encode(fields))


def opened() -> GeminiLiveProtocol:
    tools = ToolRegistry()

    @tools.tool(irreversible=True)
    async def end_call(reason: str) -> str:
        """Hang up."""
        return reason

    @tools.tool
    async def lookup(city: str) -> str:
        """Look a city up."""
        return city

    protocol = GeminiLiveProtocol(tools)
    protocol.opened("s1", now=0.0)
    return protocol


def calls(*names: str) -> wire.ServerMessage:
    function_calls = [
        {"id": f"c{i}", "name": n, "args": {"reason": "x"} if n == "end_call" else {"city": "A"}}
        for i, n in enumerate(names)
    ]
    return message(toolCall={"functionCalls": function_calls})


def test_a_call_of_an_irreversible_tool_runs_unconfirmed_and_others_confirmed() -> None:
    protocol = opened()
    (run,) = of(protocol.receive(calls("end_call", "lookup"), now=1.0), RunCalls)
    assert not run.confirmed
    (run,) = of(opened().receive(calls("lookup"), now=1.0), RunCalls)
    assert run == RunCalls([Call("c0", "lookup", {"city": "A"})], 0)  # confirmed


@pytest.mark.parametrize("ending", ["generationComplete", "turnComplete"])
def test_the_end_of_the_generation_confirms_the_turn(ending: str) -> None:
    protocol = opened()
    protocol.receive(calls("end_call"), now=1.0)
    out = protocol.receive(message(serverContent={ending: True}), now=1.1)
    assert of(out, ConfirmCalls) == [ConfirmCalls(["c0"])]
    out = protocol.receive(message(serverContent={"turnComplete": True}), now=1.2)
    assert of(out, ConfirmCalls) == []  # once


def test_an_interruption_withdraws_the_turn_even_with_turn_complete_in_the_same_message() -> None:
    protocol = opened()
    protocol.receive(calls("end_call"), now=1.0)
    out = protocol.receive(message(serverContent={"interrupted": True, "turnComplete": True}), 1.1)
    assert of(out, ConfirmCalls) == [
        ConfirmCalls(["c0"], withdrawn="the model's turn was interrupted")
    ]


@pytest.mark.parametrize("item", [Text("wait"), Signal("activity_start")])
def test_new_input_withdraws_the_turn(item: Text | Signal) -> None:
    protocol = opened()
    protocol.receive(calls("end_call"), now=1.0)
    out = protocol.sent(item, now=1.1)
    assert of(out, ConfirmCalls) == [
        ConfirmCalls(["c0"], withdrawn="new input from the user arrived")
    ]
    later = protocol.receive(message(serverContent={"generationComplete": True}), now=1.2)
    assert of(later, ConfirmCalls) == []  # withdrawn stays withdrawn
