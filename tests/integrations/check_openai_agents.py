"""The Agents SDK's own run loop (``Runner.run``) executing livebridge's function tools.

Run inside the SDK's pinned environment (``tests/integrations/venv.py``) by
``test_openai_agents.py``; the model is the SDK's own scripted test model, so every step
between a model response and the model's next input is the SDK's.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import pytest
from agents import Agent, Runner, set_tracing_disabled
from agents.items import ToolCallOutputItem
from agents.testing import ScriptedModel, assistant_message, function_call
from prometheus_client import CollectorRegistry

from livebridge import CallPolicy, ToolError, ToolRegistry
from livebridge.integrations.openai_agents import function_tools
from livebridge.observe.metrics import PrometheusObserver
from tests.integrations.framework import docs_program
from tests.support.timing import seconds

set_tracing_disabled(True)  # no trace export: the checks run offline


def registry(runs: list[str]) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool
    async def order(item: str, quantity: int = 1) -> dict[str, Any]:
        """Order an item."""
        runs.append(item)
        await anyio.sleep(0.05)  # the calls of one response overlap
        if item == "unicorn":
            raise ToolError("out of stock", retryable=False)
        if item == "bug":
            raise RuntimeError("database password is hunter2")
        return {"item": item, "quantity": quantity}

    @tools.tool(timeout=0.3)
    async def stall() -> None:
        """Never answers."""
        runs.append("stall")
        await anyio.sleep_forever()

    return tools


async def run(steps: list[list[Any]], **options: Any) -> tuple[dict[str, Any], list[str], Any]:
    """Run an agent through ``steps`` (each a model response); the model's tool outputs by id."""
    runs: list[str] = []
    tools = function_tools(registry(runs), **options)
    model = ScriptedModel([*steps, [assistant_message("done")]])
    agent = Agent(name="shop", instructions="Order things.", model=model, tools=tools)
    result = await Runner.run(agent, "go")
    assert result.final_output == "done"
    outputs = {
        item.raw_item["call_id"]: json.loads(item.output)
        for item in result.new_items
        if isinstance(item, ToolCallOutputItem)
    }
    return outputs, runs, result


async def test_answers_are_livebridge_answers() -> None:
    outputs, runs, _ = await run([[function_call("order", {"item": "tea"}, call_id="c1")]])
    assert outputs == {"c1": {"output": {"item": "tea", "quantity": 1}}}
    assert runs == ["tea"]


async def test_bad_arguments_are_structured_errors_and_never_run() -> None:
    outputs, runs, _ = await run(
        [
            [
                function_call("order", '{"item": "tea"', call_id="json"),  # cut short
                function_call("order", {"item": "tea", "quantity": "two"}, call_id="type"),
                function_call("order", {"item": "jam"}, call_id="fine"),
            ]
        ]
    )
    assert outputs["json"]["error"]["type"] == "invalid_arguments"
    assert "not valid JSON" in outputs["json"]["error"]["message"]
    assert outputs["type"]["error"]["type"] == "invalid_arguments"
    assert "quantity" in outputs["type"]["error"]["message"]
    assert outputs["fine"] == {"output": {"item": "jam", "quantity": 1}}
    assert runs == ["jam"]


async def test_raising_tools_answer_without_ending_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.CRITICAL, "livebridge")  # the raise is logged; not this test's point
    outputs, _, _ = await run(
        [
            [
                function_call("order", {"item": "unicorn"}, call_id="told"),
                function_call("order", {"item": "bug"}, call_id="hidden"),
            ]
        ]
    )
    assert outputs["told"] == {
        "error": {"type": "tool_error", "message": "out of stock", "retryable": False}
    }
    hidden = outputs["hidden"]["error"]
    assert hidden["type"] == "RuntimeError" and "hunter2" not in hidden["message"]


async def test_policy_timeout_not_the_frameworks() -> None:
    with anyio.fail_after(seconds(10)):
        outputs, runs, _ = await run([[function_call("stall", {}, call_id="slow")]])
    assert outputs["slow"]["error"]["type"] == "timeout"
    assert outputs["slow"]["error"]["retryable"] is True
    assert runs == ["stall"]


async def test_fanout_limit_and_twins_within_one_response() -> None:
    calls = [function_call("order", {"item": f"i{n}"}, call_id=f"f{n}") for n in range(4)]
    # The model asks for the same thing three times under new ids: it runs once.
    again = [function_call("order", {"item": "tea"}, call_id=f"t{n}") for n in range(3)]
    outputs, runs, _ = await run([calls, again], policy=CallPolicy(max_calls_per_turn=3))
    assert [outputs[f"f{n}"].get("output", {}).get("item") for n in range(3)] == ["i0", "i1", "i2"]
    assert outputs["f3"]["error"]["type"] == "fanout_limit"
    assert outputs["t0"] == {"output": {"item": "tea", "quantity": 1}}
    for twin in ("t1", "t2"):
        assert outputs[twin]["error"]["type"] == "duplicate_call"
        assert outputs[twin]["error"]["duplicate_of"] == "t0"
    assert runs == ["i0", "i1", "i2", "tea"]  # four runs for seven calls


async def test_metrics_per_call() -> None:
    prometheus = CollectorRegistry()
    observer = PrometheusObserver(prometheus, functions=["order", "stall"])
    await run(
        [
            [
                function_call("order", {"item": "tea"}, call_id="a"),
                function_call("order", {"item": "unicorn"}, call_id="b"),
                function_call("order", "{", call_id="c"),
            ]
        ],
        observers=[observer],
    )

    def calls(outcome: str) -> float | None:
        labels = {"function": "order", "outcome": outcome, "behavior": "BLOCKING"}
        return prometheus.get_sample_value("livebridge_tool_calls_total", labels)

    assert (calls("ok"), calls("error"), calls("rejected")) == (1.0, 1.0, 1.0)


async def test_realtime_session_against_the_emulator(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's realtime session, connected to livebridge's OpenAI Realtime emulator over TLS,
    runs the three calls the model issues through livebridge: a slow city times out on
    livebridge's policy, a failing one answers livebridge's error, and the emulator sees an
    output for every call."""
    from agents.realtime import RealtimeAgent, RealtimeRunner

    from livebridge.emulator import Emulator

    tools = ToolRegistry()
    runs: list[str] = []

    @tools.tool(timeout=0.5)
    async def get_weather(city: str) -> dict[str, Any]:
        """Weather for a city."""
        runs.append(city)
        if city == "Lisbon":
            await anyio.sleep_forever()
        if city == "Paris":
            raise ToolError("the Paris station is offline")
        return {"city": city, "sky": "sunny"}

    async with Emulator(protocol="openai") as emu:
        monkeypatch.setenv("SSL_CERT_FILE", emu.ca_file)
        agent = RealtimeAgent(name="weather", instructions="Weather.", tools=function_tools(tools))
        runner = RealtimeRunner(agent, config={"model_settings": {"output_modalities": ["text"]}})
        url = emu.base_url.replace("https://", "wss://") + "/v1/realtime?model=gpt-realtime"
        outputs: dict[str, Any] = {}
        with anyio.fail_after(seconds(20)):
            session = await runner.run(model_config={"url": url, "api_key": "test"})
            async with session:
                await session.send_message("Weather in Oslo, Lisbon and Paris?")
                async for event in session:
                    if event.type == "tool_end":
                        outputs[json.loads(event.arguments)["city"]] = json.loads(event.output)
                        if len(outputs) == 3:
                            break
    assert outputs["Oslo"] == {"output": {"city": "Oslo", "sky": "sunny"}}
    assert outputs["Lisbon"]["error"]["type"] == "timeout"
    assert outputs["Paris"]["error"] == {
        "type": "tool_error",
        "message": "the Paris station is offline",
        "retryable": False,
    }
    assert sorted(runs) == ["Lisbon", "Oslo", "Paris"]
    # What stays the SDK's: how it sends the outputs. Every call is answered, but the SDK asks
    # for a response after each output, before all of them are in.
    assert {v.kind for v in emu.violations} <= {"early_response_create"}


async def test_the_docs_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/openai-agents.md, with the SDK's scripted model in place of OpenAI's."""
    code = docs_program("openai-agents.md")
    program, run_line = code.rstrip().rsplit("\n", 1)
    assert run_line == "asyncio.run(main())"
    namespace: dict[str, Any] = {"__name__": "docs_example"}
    exec(program, namespace)
    steps = [
        [
            function_call("get_weather", {"city": "Oslo"}, call_id="w1"),
            function_call("get_weather", {"city": "Lima"}, call_id="w2"),
        ],
        [assistant_message("Oslo and Lima: 21 C")],
    ]
    namespace["agent"].model = ScriptedModel(steps)
    await namespace["main"]()
    assert capsys.readouterr().out.strip() == "Oslo and Lima: 21 C"
