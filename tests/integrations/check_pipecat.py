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
from tests.integrations.framework import docs_program
from tests.support.timing import seconds


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
    with anyio.fail_after(seconds(20)):
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


async def test_openai_realtime_service_against_the_emulator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pipecat's OpenAI Realtime service, connected to livebridge's emulator over TLS, runs the
    three calls the model issues through livebridge and sends livebridge's answers."""
    from pipecat.frames.frames import LLMMessagesAppendFrame
    from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
    from pipecat.services.openai.realtime import events
    from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService

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
        settings = OpenAIRealtimeLLMService.Settings(
            model="gpt-realtime",
            session_properties=events.SessionProperties(output_modalities=["text"]),
        )
        url = emu.base_url.replace("https://", "wss://") + "/v1/realtime"
        llm = OpenAIRealtimeLLMService(api_key="test", base_url=url, settings=settings)
        integration.attach(llm, tools)
        pair = LLMContextAggregatorPair(LLMContext(tools=integration.tools_schema(tools)))
        received: asyncio.Queue[Any] = asyncio.Queue()
        sink = QueuedFrameProcessor(queue=received, queue_direction=FrameDirection.DOWNSTREAM)
        pipeline = Pipeline([pair.user(), llm, sink, pair.assistant()])
        worker = PipelineWorker(pipeline, cancel_on_idle_timeout=False)
        started = asyncio.Event()

        @worker.event_handler("on_pipeline_started")  # type: ignore[untyped-decorator]
        async def _started(worker: Any, frame: Any) -> None:
            started.set()

        results: dict[str, Any] = {}

        async def drive() -> None:
            await started.wait()
            ask = [{"role": "user", "content": "Weather in Oslo, Lisbon and Paris?"}]
            await worker.queue_frame(LLMMessagesAppendFrame(ask, run_llm=True))
            while len(results) < 3:
                frame = await received.get()
                if isinstance(frame, FunctionCallResultFrame):
                    results[frame.arguments["city"]] = frame.result
            await emu.wait_for(lambda: len(emu.realtime_sessions[0].answered) == 3)
            await worker.queue_frame(EndFrame())

        runner = WorkerRunner()
        await runner.add_workers(worker)
        with anyio.fail_after(seconds(30)):
            await asyncio.gather(runner.run(), drive())
    assert results["Oslo"] == {"output": {"city": "Oslo", "sky": "sunny"}}
    assert results["Lisbon"]["error"]["type"] == "timeout"  # livebridge's 0.5 s
    assert results["Paris"]["error"] == {
        "type": "tool_error",
        "message": "the Paris station is offline",
        "retryable": False,
    }
    assert sorted(runs) == ["Lisbon", "Oslo", "Paris"]
    # What stays Pipecat's: every call is answered, but it asks for a response after each
    # output, before all of them are in.
    assert {v.kind for v in emu.violations} <= {"early_response_create"}


def test_the_docs_example_registers_the_tools() -> None:
    """docs/pipecat.md: the service knows every tool, and the context declares it."""
    code = docs_program("pipecat.md")
    namespace: dict[str, Any] = {"__name__": "docs_example"}
    exec(code, namespace)
    assert namespace["llm"].has_function("get_weather")
    declared = [f.name for f in namespace["context"].tools.standard_tools]
    assert declared == ["get_weather"]
