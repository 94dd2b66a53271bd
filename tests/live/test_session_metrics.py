"""Metrics after a scripted emulator conversation equal what happened on the wire."""

from __future__ import annotations

import asyncio
import threading

import anyio
from prometheus_client import CollectorRegistry

import livebridge
from livebridge import LiveSession, ToolError
from livebridge.emulator import Conversation, Emulator
from livebridge.observe.metrics import PrometheusObserver
from livebridge.protocol.events import Resumed, TextOut, ToolCallStarted
from tests.support.gemini_sessions import MODEL, TEXT_CONFIG, client_messages, collect_until, errors


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


async def test_metrics_match_a_scripted_conversation() -> None:
    started = threading.Event()
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def get_weather(city: str) -> str:
        """Weather for a city."""
        return f"sunny in {city}"

    @tools.tool
    async def get_traffic(city: str) -> str:
        """Traffic for a city."""
        raise ToolError("feed down")

    @tools.tool(timeout=0.2)
    async def get_news(city: str) -> str:
        """News, slowly."""
        await anyio.sleep(30)
        return "never"

    @tools.tool
    async def slow_search(query: str) -> str:
        """Search slowly."""
        started.set()
        await anyio.sleep(30)
        return "never"

    async def scenario(conv: Conversation) -> None:
        if conv.resumed_from is not None:
            await conv.expect_turn()
            await conv.say("resumed")
            await conv.turn_complete()
            return
        await conv.expect_turn()
        ids = await conv.tool_call(
            [
                ("get_weather", {"city": "Rome"}),
                ("get_traffic", {"city": "Rome"}),
                ("get_news", {"city": "Rome"}),
            ]
        )
        await conv.wait_answers(ids)
        await conv.turn_complete()
        await conv.expect_turn()
        ids = await conv.tool_call([("slow_search", {"query": "q"}), ("launch_rockets", {})])
        await asyncio.to_thread(started.wait, 10)
        await conv.cancel(ids[:1])
        await conv.wait_answers(ids)
        await conv.turn_complete()
        await conv.go_away("20s")
        await asyncio.sleep(60)

    registry = CollectorRegistry()
    observer = PrometheusObserver(registry, functions=tools.names())
    async with Emulator(scenario) as emu:
        async with LiveSession.connect(
            emu.client(), model=MODEL, tools=tools, config=TEXT_CONFIG, observers=[observer]
        ) as session:
            assert sample(registry, "livebridge_sessions_active") == 1
            await session.send_text("one")
            await collect_until(session, lambda e: isinstance(e, ToolCallStarted))
            await session.send_text("two")
            await collect_until(session, lambda e: isinstance(e, Resumed))
            await session.send_text("three")
            await collect_until(session, lambda e: isinstance(e, TextOut) and e.text == "resumed")
        assert errors(emu) == []

    def calls(function: str, outcome: str) -> float:
        return sample(
            registry,
            "livebridge_tool_calls_total",
            function=function,
            outcome=outcome,
            behavior="BLOCKING",
        )

    assert calls("get_weather", "ok") == 1
    assert calls("get_traffic", "error") == 1
    assert calls("get_news", "timeout") == 1
    assert calls("slow_search", "cancelled") == 1
    assert calls("other", "rejected") == 1
    assert (
        sample(
            registry,
            "livebridge_tool_rejections_total",
            function="other",
            reason="unknown_function",
        )
        == 1
    )
    assert sample(registry, "livebridge_tool_cancellations_total", function="slow_search") == 1
    # Handler time is observed for every call that ran; turnaround for every answer sent.
    ran = ("get_weather", "get_traffic", "get_news", "slow_search")
    for function in ran:
        assert (
            sample(registry, "livebridge_tool_call_duration_seconds_count", function=function) == 1
        ), function
    answered = ("get_weather", "get_traffic", "get_news", "other")
    for function in answered:
        assert (
            sample(
                registry,
                "livebridge_tool_turnaround_seconds_count",
                function=function,
                behavior="BLOCKING",
            )
            == 1
        ), function
    assert (
        sample(
            registry,
            "livebridge_tool_turnaround_seconds_count",
            function="slow_search",
            behavior="BLOCKING",
        )
        == 0
    )
    assert sample(registry, "livebridge_tool_calls_per_turn_count") == 2
    assert sample(registry, "livebridge_tool_calls_per_turn_sum") == 5
    assert sample(registry, "livebridge_tool_calls_in_flight") == 0
    assert sample(registry, "livebridge_sessions_active") == 0
    assert sample(registry, "livebridge_session_reconnects_total", reason="go_away") == 1
    tool_calls = sum(
        1 for e in emu.transcript if e.direction == "server" and "toolCall" in e.message
    )
    assert (
        sample(registry, "livebridge_messages_total", direction="received", type="toolCall")
        == tool_calls
    )
    assert sample(
        registry, "livebridge_messages_total", direction="sent", type="toolResponse"
    ) == len(client_messages(emu, "toolResponse"))
