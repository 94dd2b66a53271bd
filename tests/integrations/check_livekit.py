"""LiveKit Agents' own function-call executor (``llm.utils.execute_function_call``) running
livebridge's tools.

Run inside LiveKit's pinned environment (``tests/integrations/venv.py``) by
``test_livekit.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import anyio
import pytest
from livekit.agents.llm import FunctionToolCall, ToolContext
from livekit.agents.llm.utils import execute_function_call
from prometheus_client import CollectorRegistry

from livebridge import ToolError, ToolRegistry
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
