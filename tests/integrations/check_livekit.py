"""LiveKit Agents running livebridge's tools: its own function-call executor
(``llm.utils.execute_function_call``), and an ``AgentSession`` on the OpenAI Realtime plugin
against livebridge's emulator over TLS, with no room (text in, text out).

Run inside LiveKit's pinned environment (``tests/integrations/venv.py``) by
``test_livekit.py``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anyio
import pytest
from livekit.agents import Agent, AgentSession
from livekit.agents.llm import FunctionToolCall, ToolContext
from livekit.agents.llm.utils import execute_function_call
from prometheus_client import CollectorRegistry

from livebridge import CallPolicy, ToolError, ToolRegistry
from livebridge.calls.observers import CallSettled, Event
from livebridge.emulator import Conversation, Emulator
from livebridge.integrations.livekit import function_tools
from livebridge.observe.metrics import PrometheusObserver
from tests.integrations.framework import docs_program


def registry(runs: list[str], gate: asyncio.Event) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(timeout=0.5)
    async def order(item: str) -> dict[str, Any]:
        """Order an item."""
        runs.append(item)
        if item == "tea":
            await gate.wait()
        if item == "unicorn":
            raise ToolError("out of stock")
        if item == "slow":
            await anyio.sleep_forever()
        return {"item": item}

    return tools


async def execute(context: ToolContext, call_id: str, arguments: Any) -> tuple[str, bool]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    call = FunctionToolCall(name="order", arguments=text, call_id=call_id)
    result = await execute_function_call(call, context)
    assert result.fnc_call_out is not None
    return result.fnc_call_out.output, result.fnc_call_out.is_error


async def test_structured_errors_timeouts_and_one_run_per_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.CRITICAL)
    runs: list[str] = []
    gate = asyncio.Event()
    prometheus = CollectorRegistry()
    observer = PrometheusObserver(prometheus, functions=["order"])
    context = ToolContext(function_tools(registry(runs, gate), observers=[observer]))
    jam = await execute(context, "c1", {"item": "jam"})
    assert (json.loads(jam[0]), jam[1]) == ({"output": {"item": "jam"}}, False)
    told, is_error = await execute(context, "c2", {"item": "unicorn"})
    assert is_error and json.loads(told) == {
        "error": {"type": "tool_error", "message": "out of stock", "retryable": False}
    }
    slow, is_error = await execute(context, "c3", {"item": "slow"})
    assert is_error and json.loads(slow)["error"]["type"] == "timeout"  # LiveKit has none
    wrong, is_error = await execute(context, "c4", {"item": 5})
    assert is_error and json.loads(wrong)["error"]["type"] == "invalid_arguments"
    # The model asks again under new ids while the first still runs: it runs once.
    async with anyio.create_task_group() as group:
        answers: list[str] = []

        async def one(call_id: str) -> None:
            answers.append((await execute(context, call_id, {"item": "tea"}))[0])

        for call_id in ("t1", "t2", "t3"):
            group.start_soon(one, call_id)
        await anyio.wait_all_tasks_blocked()
        gate.set()
    assert [json.loads(a) for a in answers] == [{"output": {"item": "tea"}}] * 3
    assert runs == ["jam", "unicorn", "slow", "tea"]
    counts = {"ok": 2.0, "error": 1.0, "timeout": 1.0, "rejected": 1.0, "duplicate": 2.0}
    for outcome, count in counts.items():
        labels = {"function": "order", "outcome": outcome, "behavior": "BLOCKING"}
        assert prometheus.get_sample_value("livebridge_tool_calls_total", labels) == count


def test_the_docs_example_builds_the_agent() -> None:
    namespace: dict[str, Any] = {"__name__": "docs_example"}
    exec(docs_program("livekit.md"), namespace)
    assert [tool.info.name for tool in namespace["agent"].tools] == ["get_weather"]


@contextlib.asynccontextmanager
async def agent_session(
    emu: Emulator, tools: list[Any]
) -> AsyncIterator[tuple[AgentSession[None], Agent]]:
    """A LiveKit ``AgentSession`` on the OpenAI Realtime plugin, connected to ``emu`` over
    TLS, with no room: text in (``run(user_input=...)``), text out."""
    from livekit.plugins import openai as livekit_openai

    trusted = ssl.create_default_context(cafile=emu.ca_file)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=trusted)) as http:
        model = livekit_openai.realtime.RealtimeModel(
            api_key="test",
            base_url=f"{emu.base_url}/v1",
            modalities=["text"],
            http_session=http,
        )
        agent = Agent(instructions="Answer with the weather.", tools=tools)
        session: AgentSession[None] = AgentSession(llm=model)
        await session.start(agent)
        try:
            yield session, agent
        finally:
            await session.aclose()


def sent(emu: Emulator, kind: str, item: str | None = None) -> list[dict[str, Any]]:
    """The client's events of type ``kind`` (with an ``item`` of type ``function_call_<item>``)."""
    events = [e.message for e in emu.transcript if e.direction == "client"]
    events = [e for e in events if e.get("type") == kind]
    if item is not None:
        events = [e for e in events if e["item"].get("type") == f"function_call_{item}"]
    return events


def sent_outputs(emu: Emulator) -> list[tuple[str, dict[str, Any]]]:
    """Each call's ``function_call_output`` as the emulator received it, with its city."""
    (connection,) = emu.realtime_sessions
    calls = connection.checker.calls
    return [(calls[i].args["city"], a.response or {}) for i, a in connection.answered.items()]


async def test_an_agent_session_runs_the_models_parallel_calls_through_livebridge(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """LiveKit's realtime model against livebridge's emulator: one response's five calls run
    through livebridge, and what the emulator receives is livebridge's answers. The second
    Rome is the first one's twin (one response, one turn): it runs once."""
    caplog.set_level(logging.CRITICAL)
    runs: list[str] = []
    paris_ran = asyncio.Event()
    tools = ToolRegistry()

    @tools.tool(timeout=0.5)
    async def get_weather(city: str) -> dict[str, Any]:
        """Weather for a city."""
        runs.append(city)
        if city == "Rome":  # held until the calls issued after its twin are running
            await paris_ran.wait()
        if city == "Lisbon":
            await anyio.sleep_forever()
        if city == "Paris":
            paris_ran.set()
            raise ToolError("the Paris station is offline")
        return {"city": city, "sky": "sunny"}

    order = ["Rome", "Oslo", "Rome", "Paris", "Lisbon"]  # the model asks for Rome twice

    ids: list[str] = []

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids.extend(await conv.tool_call([("get_weather", {"city": city}) for city in order]))
        await conv.wait_answers(ids)
        await conv.say("Rome and Oslo are sunny.")
        await conv.turn_complete()

    prometheus = CollectorRegistry()
    observer = PrometheusObserver(prometheus, functions=["get_weather"])
    async with Emulator(scenario, protocol="openai") as emu:
        async with agent_session(emu, function_tools(tools, observers=[observer])) as (
            session,
            _,
        ):
            with anyio.fail_after(20):
                result = await session.run(user_input="Weather in Rome, Oslo, Paris, Lisbon?")
        outputs = sorted(sent_outputs(emu), key=lambda pair: pair[0])
        kinds = [v.kind for v in emu.violations]
    sky = {"output": {"city": "Oslo", "sky": "sunny"}}
    rome = {"output": {"city": "Rome", "sky": "sunny"}}
    paris = {"type": "tool_error", "message": "the Paris station is offline", "retryable": False}
    assert [city for city, _ in outputs] == ["Lisbon", "Oslo", "Paris", "Rome", "Rome"]
    (lisbon, oslo, paris_output, *romes) = [response for _, response in outputs]
    assert lisbon["error"]["type"] == "timeout"  # livebridge's 0.5 s; LiveKit has none
    assert (oslo, paris_output) == (sky, {"error": paris})
    ran, twin = sorted(romes, key=lambda response: "error" in response)
    assert ran == rome
    assert (twin["error"]["type"], twin["error"]["duplicate_of"]) == ("duplicate_call", ids[0])
    assert sorted(runs) == ["Lisbon", "Oslo", "Paris", "Rome"]  # Rome ran once
    errors = [e.item for e in result.events if e.type == "function_call_output" and e.item.is_error]
    assert len(errors) == 3  # LiveKit's error outputs: Paris, Lisbon and the twin
    counts = {"ok": 2.0, "error": 1.0, "timeout": 1.0, "duplicate": 1.0}
    for outcome, count in counts.items():
        labels = {"function": "get_weather", "outcome": outcome, "behavior": "BLOCKING"}
        assert prometheus.get_sample_value("livebridge_tool_calls_total", labels) == count
    # What LiveKit does itself: all of a response's outputs, then one response.create.
    assert kinds == []


class Settled:
    """Each settled call's city and turn; ``first`` is done once a call for ``city`` has its
    outcome (awaited from the emulator's thread)."""

    def __init__(self, city: str) -> None:
        self.turns: list[tuple[str, int]] = []
        self.first: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._city = city

    def on_event(self, event: Event) -> None:
        if isinstance(event, CallSettled):
            self.turns.append((event.call.args["city"], event.turn))
            if event.call.args["city"] == self._city and not self.first.done():
                self.first.set_result(None)


async def test_the_calls_of_one_response_are_one_turn(caplog: pytest.LogCaptureFixture) -> None:
    """``max_calls_per_turn=3`` and a response of five calls: the first three are in, and the
    second Rome, issued once the first has its answer, is its twin (not a new request): Rome
    runs once, Oslo runs, Paris and Lisbon are answered ``fanout_limit``. The response that
    follows the answers is a turn of its own: its three calls run, Rome again too."""
    caplog.set_level(logging.CRITICAL)
    runs: list[str] = []
    tools = ToolRegistry()

    @tools.tool(timeout=5)
    async def get_weather(city: str) -> dict[str, Any]:
        """Weather for a city."""
        runs.append(city)
        return {"city": city, "sky": "sunny"}

    settled = Settled("Rome")
    first: list[str] = []
    second: list[str] = []

    def asks(*cities: str) -> list[tuple[str, dict[str, Any]]]:
        return [("get_weather", {"city": city}) for city in cities]

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        first.extend(await conv.tool_call(asks("Rome")))
        await asyncio.wrap_future(settled.first)  # Rome is answered: no re-issue of it now
        first.extend(await conv.tool_call(asks("Rome", "Oslo", "Paris", "Lisbon")))
        await conv.wait_answers(first)
        # LiveKit sends the five outputs, then response.create: the next response.
        second.extend(await conv.tool_call(asks("Paris", "Lisbon", "Rome")))
        await conv.wait_answers(second)
        await conv.say("It is sunny everywhere.")
        await conv.turn_complete()

    made = function_tools(tools, policy=CallPolicy(max_calls_per_turn=3), observers=[settled])
    async with Emulator(scenario, protocol="openai") as emu:
        async with agent_session(emu, made) as (session, _):
            with anyio.fail_after(20):
                await session.run(user_input="Weather in Rome, Oslo, Paris, Lisbon?")
        (connection,) = emu.realtime_sessions
        answers = {call_id: a.response or {} for call_id, a in connection.answered.items()}
        kinds = [v.kind for v in emu.violations]

    def sunny(city: str) -> dict[str, Any]:
        return {"output": {"city": city, "sky": "sunny"}}

    assert runs == ["Rome", "Oslo", "Paris", "Lisbon", "Rome"]
    rome, twin, oslo, *refused = [answers[call_id] for call_id in first]
    assert (rome, oslo) == (sunny("Rome"), sunny("Oslo"))
    assert (twin["error"]["type"], twin["error"]["duplicate_of"]) == ("duplicate_call", first[0])
    for answer in refused:
        assert (answer["error"]["type"], answer["error"]["retryable"]) == ("fanout_limit", True)
    assert [answers[call_id] for call_id in second] == [
        sunny(c) for c in ("Paris", "Lisbon", "Rome")
    ]
    # One turn per response: the first five calls share one, the next three another.
    turns = [turn for _, turn in settled.turns]
    assert len(turns) == 8 and len(set(turns[:5])) == len(set(turns[5:])) == 1
    assert turns[0] != turns[5]
    assert kinds == []


@pytest.mark.parametrize("cancel", ["barge-in", "barge-in-later", "server"])
async def test_a_cancelled_response_and_its_call(
    caplog: pytest.LogCaptureFixture, cancel: str
) -> None:
    """A barge-in while the model's response is still generating (OpenAI Realtime's
    ``input_audio_buffer.speech_started``; the response ends ``cancelled``) interrupts the
    speech that issued the call, and livebridge cancels the call; LiveKit still answers it
    (livebridge's ``cancelled``) and asks for no response. A barge-in once the response is
    done (LiveKit is "thinking" while the tool runs) interrupts the speech too, but the server
    cancelled nothing: the call runs on and is answered (here livebridge's timeout). A
    response the server ends ``cancelled`` with no barge-in interrupts nothing: LiveKit lets
    the call finish, answers it and asks for a response."""
    caplog.set_level(logging.CRITICAL)
    started: concurrent.futures.Future[None] = concurrent.futures.Future()
    thinking: concurrent.futures.Future[None] = concurrent.futures.Future()
    release: concurrent.futures.Future[None] = concurrent.futures.Future()
    ended: list[str] = []
    tools = ToolRegistry()

    @tools.tool(timeout=1.0 if cancel == "barge-in-later" else 30)
    async def book(table: str) -> dict[str, Any]:
        """Book a table."""
        started.set_result(None)
        try:
            await asyncio.wrap_future(release)  # never, after a barge-in
        except BaseException:
            ended.append("cancelled")
            raise
        ended.append("finished")
        return {"booked": table}

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        (call_id,) = await conv.tool_call([("book", {"table": "by the window"})])
        await asyncio.wrap_future(started)  # the tool runs (on the client's loop)
        if cancel == "barge-in":
            await conv.interrupted()  # speech_started, the response ends cancelled
            return
        if cancel == "barge-in-later":
            await conv.realtime.end_calls([call_id])  # the response ends completed
            await asyncio.wrap_future(thinking)
            speech = {"type": "input_audio_buffer.speech_started", "audio_start_ms": 0}
            await conv.send({**speech, "item_id": "item_user_speech"})
            return  # the tool runs on into its timeout
        await conv.cancel([call_id])  # the response ends cancelled, no one spoke
        # The tool ends once LiveKit has read the cancellation (its pong behind it).
        await conv.realtime.after_pong(lambda: release.set_result(None))

    prometheus = CollectorRegistry()
    observer = PrometheusObserver(prometheus, functions=["book"])
    async with Emulator(scenario, protocol="openai") as emu:
        async with agent_session(emu, function_tools(tools, observers=[observer])) as (
            session,
            _,
        ):

            @session.on("agent_state_changed")  # type: ignore[untyped-decorator]
            def _state(event: Any) -> None:
                if event.new_state == "thinking" and not thinking.done():
                    thinking.set_result(None)  # the response's generation is done

            with anyio.fail_after(20):
                session.generate_reply(user_input="Book the table by the window.")
                await emu.wait_for(lambda: bool(sent(emu, "conversation.item.create", "output")))
                if cancel == "server":  # its response.create follows the output
                    await emu.wait_for(lambda: len(sent(emu, "response.create")) == 2)
        (output,) = sent(emu, "conversation.item.create", "output")
        kinds = [v.kind for v in emu.violations]
        creates = len(sent(emu, "response.create"))
    answer = json.loads(output["item"]["output"])
    outcome = {"barge-in": "cancelled", "barge-in-later": "timeout"}.get(cancel, "ok")
    labels = {"function": "book", "outcome": outcome, "behavior": "BLOCKING"}
    assert prometheus.get_sample_value("livebridge_tool_calls_total", labels) == 1.0
    if cancel == "barge-in":
        assert ended == ["cancelled"]  # long before the 30 s the tool was allowed
        assert (answer["error"]["type"], creates) == ("cancelled", 1)
        # What stays LiveKit's: it answers a call whose response was cancelled.
        assert kinds == ["answered_cancelled_call"]
    elif cancel == "barge-in-later":
        assert ended == ["cancelled"]  # by livebridge's 1 s timeout, not the barge-in
        assert answer["error"]["type"] == "timeout"
        assert "answered_cancelled_call" not in kinds
    else:
        assert ended == ["finished"]
        assert (answer, creates) == ({"output": {"booked": "by the window"}}, 2)
        assert kinds == ["answered_cancelled_call"]  # LiveKit's, as above
