"""Pipecat's own function-call path (``LLMService.run_function_calls`` in a running pipeline)
executing livebridge's tools.

Run inside Pipecat's pinned environment (``tests/integrations/venv.py``) by
``test_pipecat.py``: the calls go through Pipecat's dispatch, timeouts and result frames.
"""

from __future__ import annotations

import asyncio
from importlib import metadata
from typing import Any

import anyio
import pytest
from pipecat.frames.frames import EndFrame, FunctionCallFromLLM, FunctionCallResultFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.tests.utils import QueuedFrameProcessor
from pipecat.workers.runner import WorkerRunner
from prometheus_client import CollectorRegistry

from livebridge import ToolError, ToolRegistry, UsageError
from livebridge.integrations import pipecat as integration
from livebridge.observe.metrics import PrometheusObserver


def registry(runs: list[str], gate: asyncio.Event) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(timeout=0.5)
    async def order(item: str) -> dict[str, Any]:
        """Order an item."""
        runs.append(item)
        if item == "tea":
            await gate.wait()  # held until every call of the test is in
        if item == "unicorn":
            raise ToolError("out of stock")
        if item == "slow":
            await anyio.sleep_forever()
        return {"item": item}

    return tools


async def run_calls(
    batches: list[list[tuple[str, dict[str, Any]]]], *, hold: int = 0, **options: Any
) -> tuple[dict[str, Any], list[str]]:
    """Each batch through ``run_function_calls`` of a running pipeline; the results by id.

    A "tea" order is held until ``hold`` calls are in the dispatcher (running or waiting)."""
    runs: list[str] = []
    gate = asyncio.Event()
    llm = OpenAILLMService(api_key="test")  # never asked to infer: no connection
    dispatcher = integration.attach(llm, registry(runs, gate), **options)
    received: asyncio.Queue[Any] = asyncio.Queue()
    sink = QueuedFrameProcessor(queue=received, queue_direction=FrameDirection.DOWNSTREAM)
    worker = PipelineWorker(Pipeline([llm, sink]), cancel_on_idle_timeout=False)
    started = asyncio.Event()

    @worker.event_handler("on_pipeline_started")  # type: ignore[untyped-decorator]
    async def _started(worker: Any, frame: Any) -> None:
        started.set()

    results: dict[str, Any] = {}
    total = sum(len(batch) for batch in batches)

    async def drive() -> None:
        await started.wait()
        context = LLMContext()
        number = 0
        for batch in batches:
            calls = []
            for name, arguments in batch:
                number += 1
                calls.append(FunctionCallFromLLM(name, f"call-{number}", arguments, context))
            await llm.run_function_calls(calls)
        # Pipecat starts each handler in a task of its own; no event says all are in.
        while dispatcher.lingering < hold:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        gate.set()
        while len(results) < total:
            frame = await received.get()
            if isinstance(frame, FunctionCallResultFrame):
                results[frame.tool_call_id] = frame.result
        await worker.queue_frame(EndFrame())

    runner = WorkerRunner()
    await runner.add_workers(worker)
    with anyio.fail_after(20):
        await asyncio.gather(runner.run(), drive())
    return results, runs


async def test_structured_errors_and_the_policy_timeout() -> None:
    results, runs = await run_calls(
        [[("order", {"item": "jam"}), ("order", {"item": "unicorn"}), ("order", {"item": "slow"})]]
    )
    assert results["call-1"] == {"output": {"item": "jam"}}
    assert results["call-2"] == {
        "error": {"type": "tool_error", "message": "out of stock", "retryable": False}
    }
    assert results["call-3"]["error"]["type"] == "timeout"  # livebridge's 0.5 s, not Pipecat's
    assert runs == ["jam", "unicorn", "slow"]


async def test_a_call_reissued_under_new_ids_runs_once() -> None:
    again = [("order", {"item": "tea"})]
    # Each its own run_function_calls, all three in flight together: the first runs.
    results, runs = await run_calls([again, again, again], hold=3)
    assert runs == ["tea"]
    assert results["call-1"] == {"output": {"item": "tea"}}
    assert results["call-2"] == results["call-3"] == {"output": {"item": "tea"}}


async def test_metrics_per_call() -> None:
    prometheus = CollectorRegistry()
    observer = PrometheusObserver(prometheus, functions=["order"])
    await run_calls(
        [[("order", {"item": "jam"}), ("order", {"item": "unicorn"})]], observers=[observer]
    )
    for outcome in ("ok", "error"):
        labels = {"function": "order", "outcome": outcome, "behavior": "BLOCKING"}
        assert prometheus.get_sample_value("livebridge_tool_calls_total", labels) == 1.0


def test_tools_schema_and_the_version_check(monkeypatch: pytest.MonkeyPatch) -> None:
    schema = integration.tools_schema(registry([], asyncio.Event()))
    (function,) = schema.standard_tools
    assert (function.name, function.required) == ("order", ["item"])
    monkeypatch.setattr(metadata, "version", lambda name: "1.15.0")
    with pytest.raises(UsageError, match=r"supports pipecat-ai 1\.14, not 1\.15\.0"):
        integration.attach(OpenAILLMService(api_key="test"), ToolRegistry())
