"""Pipecat's own function-call path (``LLMService.run_function_calls`` in a running pipeline)
executing livebridge's tools.

Run inside Pipecat's pinned environment (``tests/integrations/venv.py``) by
``test_pipecat.py``: the calls go through Pipecat's dispatch, timeouts and result frames.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import ssl
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


@pytest.mark.parametrize("barge_in", [True, False], ids=["barge-in", "server-cancel"])
async def test_a_cancelled_response_and_its_call(
    monkeypatch: pytest.MonkeyPatch, barge_in: bool
) -> None:
    """The model's response is cancelled while its call runs. A barge-in (OpenAI Realtime's
    ``input_audio_buffer.speech_started``) is an interruption: Pipecat cancels the handler's
    task (``cancel_on_interruption``), which cancels livebridge's call, and answers
    ``CANCELLED`` itself. A response the server ends ``cancelled`` with no barge-in is none:
    Pipecat lets the call finish and answers it, then asks for a response."""
    from pipecat.frames.frames import LLMMessagesAppendFrame
    from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
    from pipecat.services.openai.realtime import events
    from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService

    from livebridge.emulator import Conversation, Emulator

    started: concurrent.futures.Future[None] = concurrent.futures.Future()
    release: concurrent.futures.Future[None] = concurrent.futures.Future()
    ended: list[str] = []
    tools = ToolRegistry()

    @tools.tool(timeout=30)
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
        await asyncio.wrap_future(started)  # the handler runs (on the client's loop)
        if barge_in:
            await conv.interrupted()  # speech_started, the response ends cancelled
            return
        await conv.cancel([call_id])  # the response ends cancelled, no one spoke
        # The handler ends once Pipecat has read the cancellation (its pong behind it).
        await conv.realtime.after_pong(lambda: release.set_result(None))

    prometheus = CollectorRegistry()
    observer = PrometheusObserver(prometheus, functions=["book"])
    async with Emulator(scenario, protocol="openai") as emu:
        monkeypatch.setenv("SSL_CERT_FILE", emu.ca_file)
        settings = OpenAIRealtimeLLMService.Settings(
            model="gpt-realtime",
            session_properties=events.SessionProperties(output_modalities=["text"]),
        )
        url = emu.base_url.replace("https://", "wss://") + "/v1/realtime"
        llm = OpenAIRealtimeLLMService(api_key="test", base_url=url, settings=settings)
        integration.attach(llm, tools, observers=[observer])
        pair = LLMContextAggregatorPair(LLMContext(tools=integration.tools_schema(tools)))
        pipeline = Pipeline([pair.user(), llm, pair.assistant()])
        worker = PipelineWorker(pipeline, cancel_on_idle_timeout=False)
        ready = asyncio.Event()

        @worker.event_handler("on_pipeline_started")  # type: ignore[untyped-decorator]
        async def _started(worker: Any, frame: Any) -> None:
            ready.set()

        def sent(kind: str) -> list[dict[str, Any]]:
            messages = [e.message for e in emu.transcript if e.direction == "client"]
            return [m for m in messages if m.get("type") == kind]

        def outputs() -> list[dict[str, Any]]:
            items = [m["item"] for m in sent("conversation.item.create")]
            return [item for item in items if item.get("type") == "function_call_output"]

        async def drive() -> None:
            await ready.wait()
            ask = [{"role": "user", "content": "Book the table by the window."}]
            await worker.queue_frame(LLMMessagesAppendFrame(ask, run_llm=True))
            await emu.wait_for(lambda: bool(outputs()))
            if not barge_in:  # its response.create follows the output
                await emu.wait_for(lambda: len(sent("response.create")) == 2)
            await worker.queue_frame(EndFrame())

        runner = WorkerRunner()
        await runner.add_workers(worker)
        with anyio.fail_after(20):
            await asyncio.gather(runner.run(), drive())
        (output,) = outputs()
        kinds = [v.kind for v in emu.violations]
        creates = len(sent("response.create"))
    outcome = "cancelled" if barge_in else "ok"
    labels = {"function": "book", "outcome": outcome, "behavior": "BLOCKING"}
    assert prometheus.get_sample_value("livebridge_tool_calls_total", labels) == 1.0
    if barge_in:
        assert ended == ["cancelled"]  # long before the 30 s the tool was allowed
        assert (output["output"], creates) == ("CANCELLED", 1)  # Pipecat's own answer
    else:
        assert ended == ["finished"]
        assert json.loads(output["output"]) == {"output": {"booked": "by the window"}}
        assert creates == 2
    # What stays Pipecat's: either way it answers a call whose response was cancelled.
    assert kinds == ["answered_cancelled_call"]


# Pipecat 1.14 still sets the generation config google-genai 3.x deprecates.
@pytest.mark.filterwarnings("ignore:Setting `LiveConnectConfig.generation_config` is deprecated")
async def test_gemini_live_cancels_the_calls_the_server_cancels() -> None:
    """Pipecat's Gemini Live service against the emulator: the server's ``toolCallCancellation``
    cancels the handler (Pipecat 1.14 reads none; ``attach`` has it cancel the call through
    Pipecat's own path), the call settles ``cancelled``, and nothing answers it."""
    from google.genai.types import HttpOptions
    from pipecat.frames.frames import LLMMessagesAppendFrame
    from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
    from pipecat.services.google.gemini_live.llm import GeminiLiveLLMService, GeminiModalities

    from livebridge.emulator import Conversation, Emulator

    started: concurrent.futures.Future[None] = concurrent.futures.Future()
    cancelled = asyncio.Event()
    tools = ToolRegistry()

    @tools.tool(timeout=30)
    async def book(table: str) -> dict[str, Any]:
        """Book a table."""
        started.set_result(None)
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        return {}

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        (call_id,) = await conv.tool_call([("book", {"table": "by the window"})])
        await asyncio.wrap_future(started)  # the handler runs (on the client's loop)
        await conv.cancel([call_id])  # toolCallCancellation
        await conv.expect_turn()  # and the model waits for the user

    prometheus = CollectorRegistry()
    observer = PrometheusObserver(prometheus, functions=["book"])
    async with Emulator(scenario) as emu:
        trusted = ssl.create_default_context(cafile=emu.ca_file)
        llm = GeminiLiveLLMService(
            api_key="test",
            http_options=HttpOptions(base_url=emu.base_url, async_client_args={"ssl": trusted}),
            settings=GeminiLiveLLMService.Settings(modalities=GeminiModalities.TEXT),
        )
        integration.attach(llm, tools, observers=[observer])
        pair = LLMContextAggregatorPair(LLMContext(tools=integration.tools_schema(tools)))
        worker = PipelineWorker(Pipeline([pair.user(), llm, pair.assistant()]))
        ready = asyncio.Event()

        @worker.event_handler("on_pipeline_started")  # type: ignore[untyped-decorator]
        async def _started(worker: Any, frame: Any) -> None:
            ready.set()

        async def drive() -> None:
            await ready.wait()
            ask = [{"role": "user", "content": "Book the table by the window."}]
            await worker.queue_frame(LLMMessagesAppendFrame(ask, run_llm=True))
            await cancelled.wait()
            await worker.queue_frame(EndFrame())

        runner = WorkerRunner()
        await runner.add_workers(worker)
        with anyio.fail_after(20):  # long before the 30 s the tool was allowed
            await asyncio.gather(runner.run(), drive())
        answers = [
            e for e in emu.transcript if e.direction == "client" and "toolResponse" in e.message
        ]
        kinds = [v.kind for v in emu.violations]
    labels = {"function": "book", "outcome": "cancelled", "behavior": "BLOCKING"}
    assert prometheus.get_sample_value("livebridge_tool_calls_total", labels) == 1.0
    assert (answers, kinds) == ([], [])
