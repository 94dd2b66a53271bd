"""LiveSession against the emulator: the real google-genai SDK over real TLS sockets."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

import livebridge
from livebridge import CallContext, CallPolicy, LiveSession, SessionOptions, ToolError
from livebridge.emulator import Conversation, Emulator
from livebridge.protocol.events import (
    Closed,
    GoAway,
    Interrupted,
    Resumed,
    SessionEvent,
    TextOut,
    ToolCallSettled,
    ToolCallStarted,
    TurnComplete,
)
from livebridge.protocol.transport import TransportKind
from tests.support.gemini_sessions import (
    MODEL,
    TEXT_CONFIG,
    client_messages,
    collect_until,
    errors,
    of_type,
    open_session,
)

TRANSPORTS: list[TransportKind] = ["wire", "sdk"]


def is_turn_complete(event: SessionEvent) -> bool:
    return isinstance(event, TurnComplete)


# -- three parallel blocking calls: one fails, one times out ------------------------------------


def weather_tools(release: threading.Event | None = None) -> livebridge.ToolRegistry:
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def get_weather(city: str) -> dict[str, Any]:
        """Weather for a city."""
        await anyio.sleep(0.2)
        return {"city": city, "sky": "sunny"}

    @tools.tool
    async def get_traffic(city: str) -> dict[str, Any]:
        """Traffic for a city."""
        raise ToolError(f"no traffic feed for {city}")

    @tools.tool(timeout=0.3)
    async def get_news(city: str) -> str:
        """News for a city (slow)."""
        await anyio.sleep(30)
        return "never"

    return tools


async def three_calls(conv: Conversation) -> None:
    await conv.expect_turn()
    ids = await conv.tool_call(
        [
            ("get_weather", {"city": "Paris"}),
            ("get_traffic", {"city": "Paris"}),
            ("get_news", {"city": "Paris"}),
        ]
    )
    await conv.wait_answers(ids)
    await conv.say("Sunny in Paris.")
    await conv.turn_complete(usage={"totalTokenCount": 42})


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_three_parallel_blocking_calls_are_answered_in_one_message(
    transport: TransportKind,
) -> None:
    tools = weather_tools()
    async with (
        Emulator(three_calls) as emu,
        open_session(emu, tools, options=SessionOptions(transport=transport)) as session,
    ):
        await session.send_text("What about Paris?")
        events = await collect_until(session, is_turn_complete)

    responses = client_messages(emu, "toolResponse")
    assert len(responses) == 1, responses
    answers = {r["id"]: r for r in responses[0]["functionResponses"]}
    calls = [
        c
        for entry in emu.transcript
        if "toolCall" in entry.message
        for c in entry.message["toolCall"]["functionCalls"]
    ]
    assert set(answers) == {c["id"] for c in calls}
    by_name = {a["name"]: a["response"] for a in answers.values()}
    assert by_name["get_weather"] == {"output": {"city": "Paris", "sky": "sunny"}}
    assert by_name["get_traffic"]["error"]["type"] == "tool_error"
    assert "no traffic feed for Paris" in by_name["get_traffic"]["error"]["message"]
    assert by_name["get_news"]["error"]["type"] == "timeout"
    assert by_name["get_news"]["error"]["retryable"] is True

    settled = {e.name: e for e in of_type(events, ToolCallSettled)}
    assert {n: e.ending for n, e in settled.items()} == {
        "get_weather": "ok",
        "get_traffic": "error",
        "get_news": "timeout",
    }
    # The batch waits for its slowest member (the 0.3 s timeout), not the sum of all three.
    turnaround = settled["get_weather"].turnaround
    assert turnaround is not None and 0.25 < turnaround < 5.0
    assert of_type(events, TextOut)[0].text == "Sunny in Paris."
    assert of_type(events, TurnComplete)[0].usage == {"totalTokenCount": 42}
    assert errors(emu) == []
    assert emu.violations == []


# -- NON_BLOCKING: scheduling, streaming, mixed batches ------------------------------------------


def non_blocking_tools(progress: list[str]) -> livebridge.ToolRegistry:
    tools = livebridge.ToolRegistry()

    @tools.tool(behavior="NON_BLOCKING", scheduling="SILENT")
    async def note(text: str) -> str:
        """Remember a note quietly."""
        return f"noted {text}"

    @tools.tool(behavior="NON_BLOCKING", scheduling="WHEN_IDLE")
    async def check_order(order: int) -> dict[str, Any]:
        """Check an order."""
        return {"order": order, "state": "shipped"}

    @tools.tool(behavior="NON_BLOCKING")
    async def alarm(reason: str) -> livebridge.Result:
        """Raise an alarm that interrupts."""
        return livebridge.Result({"raised": reason}, scheduling="INTERRUPT")

    @tools.tool(behavior="NON_BLOCKING", scheduling="WHEN_IDLE")
    async def book_table(restaurant: str, people: int) -> AsyncIterator[dict[str, Any]]:
        """Book a table, reporting progress."""
        for step in ("searching", "holding", "confirmed"):
            progress.append(step)
            yield {"restaurant": restaurant, "people": people, "step": step}

    @tools.tool
    async def get_time(zone: str) -> str:
        """The time in a zone."""
        return f"12:00 {zone}"

    return tools


async def non_blocking_turn(conv: Conversation) -> None:
    await conv.expect_turn()
    ids = await conv.tool_call(
        [
            ("note", {"text": "milk"}),
            ("check_order", {"order": 7}),
            ("alarm", {"reason": "smoke"}),
            ("book_table", {"restaurant": "Chez Max", "people": 2}),
            ("get_time", {"zone": "UTC"}),
        ]
    )
    await conv.wait_answers(ids)
    await conv.say("All done.")
    await conv.turn_complete()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_non_blocking_answers_carry_scheduling_and_stream(transport: TransportKind) -> None:
    progress: list[str] = []
    async with (
        Emulator(non_blocking_turn) as emu,
        open_session(
            emu, non_blocking_tools(progress), options=SessionOptions(transport=transport)
        ) as session,
    ):
        await session.send_text("do everything")
        events = await collect_until(
            session, lambda e: isinstance(e, TextOut) and e.text == "All done."
        )

    sent = [r for m in client_messages(emu, "toolResponse") for r in m["functionResponses"]]
    by_name: dict[str, list[dict[str, Any]]] = {}
    for response in sent:
        by_name.setdefault(response["name"], []).append(response)
    assert by_name["note"] == [
        {
            "id": by_name["note"][0]["id"],
            "name": "note",
            "response": {"output": "noted milk"},
            "scheduling": "SILENT",
        }
    ]
    assert by_name["check_order"][0]["scheduling"] == "WHEN_IDLE"
    assert by_name["alarm"][0]["scheduling"] == "INTERRUPT"
    stream = by_name["book_table"]
    assert [r.get("willContinue") for r in stream] == [True, True, True, False]
    assert [r["response"].get("output", {}).get("step") for r in stream[:3]] == progress
    assert all(r.get("scheduling") == "WHEN_IDLE" for r in stream)
    blocking = by_name["get_time"]
    assert blocking == [
        {"id": blocking[0]["id"], "name": "get_time", "response": {"output": "12:00 UTC"}}
    ]
    assert {e.name for e in of_type(events, ToolCallSettled)} >= {
        "note",
        "check_order",
        "alarm",
        "book_table",
        "get_time",
    }
    assert errors(emu) == []


# -- cancellation and barge-in ------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_cancellation_cancels_the_handler_and_sends_nothing(
    transport: TransportKind,
) -> None:
    started = threading.Event()
    observed: list[str] = []
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def slow_search(query: str, ctx: CallContext) -> str:
        """Search slowly."""
        started.set()
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            observed.append(ctx.call_id)
            raise
        return "never"

    @tools.tool
    async def quick(query: str) -> str:
        """Answer quickly."""
        return query.upper()

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids = await conv.tool_call([("slow_search", {"query": "x"}), ("quick", {"query": "y"})])
        await asyncio.to_thread(started.wait, 10)
        await conv.cancel(ids[:1])
        await conv.wait_answers(ids)
        await conv.say("ok")
        await conv.turn_complete()

    async with (
        Emulator(scenario) as emu,
        open_session(emu, tools, options=SessionOptions(transport=transport)) as session,
    ):
        await session.send_text("search")
        events = await collect_until(session, is_turn_complete)

    cancelled_id = next(
        e.call_id for e in of_type(events, ToolCallStarted) if e.name == "slow_search"
    )
    assert observed == [cancelled_id]
    sent = [r for m in client_messages(emu, "toolResponse") for r in m["functionResponses"]]
    assert [r["name"] for r in sent] == ["quick"]
    fates = {e.name: e.ending for e in of_type(events, ToolCallSettled)}
    assert fates == {"slow_search": "cancelled", "quick": "ok"}
    assert errors(emu) == []


async def test_barge_in_interrupts_and_cancels_the_running_call() -> None:
    started = threading.Event()
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def long_lookup(topic: str) -> str:
        """Look something up slowly."""
        started.set()
        await anyio.sleep(60)
        return "never"

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.say("Let me look that up.")
        await conv.tool_call([("long_lookup", {"topic": "tides"})])
        await conv.expect_turn()  # the user's barge-in ends the model's turn (emulator cancels)
        await conv.say("Sure, stopping.")
        await conv.turn_complete()

    async with (
        Emulator(scenario) as emu,
        open_session(emu, tools) as session,
    ):
        await session.send_text("tides please")
        await collect_until(session, lambda e: isinstance(e, ToolCallStarted))
        await anyio.to_thread.run_sync(started.wait, 10)
        await session.send_activity_start()
        await session.send_text("never mind")
        await session.send_activity_end()
        events = await collect_until(
            session, lambda e: isinstance(e, TextOut) and e.text == "Sure, stopping."
        )

    assert of_type(events, Interrupted)
    assert [(e.name, e.ending) for e in of_type(events, ToolCallSettled)] == [
        ("long_lookup", "cancelled")
    ]
    assert client_messages(emu, "toolResponse") == []
    assert errors(emu) == []


# -- goAway, drops, resumption ------------------------------------------------------------------


async def test_go_away_switches_over_with_the_newest_handle() -> None:
    tools = weather_tools()
    connections: list[str | None] = []

    async def scenario(conv: Conversation) -> None:
        connections.append(conv.resumed_from)
        if conv.resumed_from is None:
            await conv.expect_turn()
            ids = await conv.tool_call([("get_weather", {"city": "Oslo"})])
            await conv.go_away("30s")  # while the call is pending
            await conv.wait_answers(ids)
            await conv.say("Cold in Oslo.")
            await conv.turn_complete()
            await asyncio.sleep(60)  # the client leaves before the deadline
        else:
            await conv.expect_turn()
            await conv.say("Still here.")
            await conv.turn_complete()

    async with (
        Emulator(scenario) as emu,
        open_session(emu, tools) as session,
    ):
        await session.send_text("Oslo?")
        first = await collect_until(session, lambda e: isinstance(e, Resumed))
        await session.send_text("still there?")
        second = await collect_until(
            session, lambda e: isinstance(e, TextOut) and e.text == "Still here."
        )

    assert of_type(first, GoAway)[0].time_left == 30.0
    assert [(e.name, e.outcome) for e in of_type(first, ToolCallSettled)] == [("get_weather", "ok")]
    resumed = of_type(first, Resumed)[0]
    assert resumed.reason == "go_away" and resumed.orphaned == ()
    assert len(connections) == 2 and connections[1] is not None
    assert second
    assert errors(emu) == []


async def test_dropped_socket_is_resumed_and_unknown_calls_are_orphaned() -> None:
    release = threading.Event()
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def fetch(key: str) -> str:
        """Fetch a value slowly."""
        await anyio.to_thread.run_sync(release.wait, 10)
        return f"value of {key}"

    connections: list[str | None] = []

    async def scenario(conv: Conversation) -> None:
        connections.append(conv.resumed_from)
        if conv.resumed_from is None:
            await conv.expect_turn()
            await conv.say("first")
            await conv.turn_complete()  # a resumable handle follows the completed turn
            await conv.expect_turn()
            await conv.tool_call([("fetch", {"key": "a"})])
            conv.session.abort()  # 1006: no close frame, the call is still pending
        else:
            assert conv.known_calls == {}
            await conv.expect_turn()
            await conv.say("back")
            await conv.turn_complete()

    async with (
        Emulator(scenario) as emu,
        open_session(emu, tools) as session,
    ):
        await session.send_text("one")
        await collect_until(session, is_turn_complete)
        await session.send_text("two")
        events = await collect_until(session, lambda e: isinstance(e, Resumed))
        release.set()
        await session.send_text("three")
        later = await collect_until(session, lambda e: isinstance(e, TextOut) and e.text == "back")

    resumed = of_type(events, Resumed)[0]
    assert resumed.reason == "dropped"
    assert len(resumed.orphaned) == 1
    orphan = [e for e in of_type(events + later, ToolCallSettled) if e.ending == "orphaned"]
    assert [e.name for e in orphan] == ["fetch"]
    assert client_messages(emu, "toolResponse") == []  # never sent to the new session
    assert len(connections) == 2
    assert errors(emu) == []


async def test_stale_handle_ends_the_session_with_a_clear_error() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.say("hi")
        await conv.turn_complete()
        await conv.expect_turn()
        emu_ref[0].expire_handles()
        conv.session.abort()

    emu_ref: list[Emulator] = []
    async with Emulator(scenario) as emu:
        emu_ref.append(emu)
        with pytest.raises(livebridge.SessionEndedError) as ended:
            async with open_session(emu, livebridge.ToolRegistry()) as session:
                await session.send_text("one")
                await collect_until(session, is_turn_complete)
                await session.send_text("two")
                await anyio.sleep_forever()  # the end interrupts the block

    assert isinstance(ended.value.error, livebridge.SessionNotFoundError)
    assert "stale" in str(ended.value.error)
    assert session.closed is not None and session.closed.error is ended.value.error


async def test_drop_before_any_handle_ends_with_a_terminal_event() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        conv.session.abort()

    async with Emulator(scenario) as emu:
        with pytest.raises(livebridge.SessionEndedError, match="resumption handle"):
            async with open_session(emu, livebridge.ToolRegistry()) as session:
                await session.send_text("hello")
                await anyio.sleep_forever()  # the end interrupts the block
        with pytest.raises(livebridge.SessionClosedError):
            await session.send_text("anyone?")

    events = [event async for event in session.events()]
    closed = of_type(events, Closed)[0]
    assert isinstance(closed.error, livebridge.ConnectionLostError)
    assert "resumption handle" in str(closed.error)


async def test_wrong_model_raises_at_connect() -> None:
    async with Emulator(models=[MODEL]) as emu:
        with pytest.raises(livebridge.ModelNotFoundError, match="model name"):
            async with LiveSession.connect(
                emu.client(), model="nope", tools=livebridge.ToolRegistry(), config=TEXT_CONFIG
            ) as session:
                await session.send_text("hello")
                await collect_until(session, lambda e: isinstance(e, Closed))


async def test_a_misspelt_or_missing_argument_is_a_type_error_before_any_socket() -> None:
    async with Emulator(models=[MODEL]) as emu:
        tools = livebridge.ToolRegistry()
        with pytest.raises(TypeError, match="unexpected keyword argument 'polcy'"):
            async with LiveSession.connect(  # type: ignore[call-arg]
                emu.client(), model=MODEL, tools=tools, polcy=CallPolicy()
            ):
                pass
        with pytest.raises(TypeError, match="missing the keyword argument 'tools'"):
            async with LiveSession.connect(emu.client(), model=MODEL):  # type: ignore[call-arg]
                pass
        assert emu.connections_served == 0  # refused before a socket opened


# -- bad input from the server -----------------------------------------------------------------


async def test_bad_server_messages_never_kill_the_actor() -> None:
    tools = weather_tools()

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.send_raw(b'{"serverContent": {"brandNewField": {"x": 1}}}')
        await conv.send_raw(b'{"toolCall": {"functionCalls": [{"name": "get_weather"}]}}')
        await conv.send_raw(b'{"toolCall": {"functionCalls": 7}}')
        await conv.send_raw(b"not json at all")
        ids = await conv.tool_call(
            [("no_such_tool", {}), ("get_weather", {"city": 12}), ("get_weather", {"town": "x"})]
        )
        await conv.wait_answers(ids)
        await conv.say("survived")
        await conv.turn_complete()

    async with (
        Emulator(scenario) as emu,
        open_session(emu, tools) as session,
    ):
        await session.send_text("go")
        events = await collect_until(
            session, lambda e: isinstance(e, TextOut) and e.text == "survived"
        )

    # The call without an id is answered by name (its arguments lack ``city``); the Developer
    # API emulator knows no such call, and says so. (Its answer and the batch's may share one
    # message, when both are ready before the writer runs.)
    answers = [a for m in client_messages(emu, "toolResponse") for a in m["functionResponses"]]
    (by_name,) = [a for a in answers if "id" not in a]
    assert by_name["name"] == "get_weather"
    assert by_name["response"]["error"]["type"] == "invalid_arguments"
    kinds = sorted(a["response"]["error"]["type"] for a in answers if "id" in a)
    assert kinds == ["invalid_arguments", "invalid_arguments", "unknown_function"]
    assert all(e.outcome == "rejected" for e in of_type(events, ToolCallSettled))
    assert [e.split(":")[0] for e in errors(emu)] == ["missing_id"]


# -- shutdown -----------------------------------------------------------------------------------


async def test_leaving_the_block_answers_calls_within_the_grace_period() -> None:
    release = threading.Event()
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def finish_soon(n: int) -> int:
        """Finishes once released."""
        await anyio.to_thread.run_sync(release.wait, 10)
        return n * 2

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        ids = await conv.tool_call([("finish_soon", {"n": 21})])
        await conv.wait_answers(ids)
        await asyncio.sleep(60)

    async with Emulator(scenario) as emu:
        async with open_session(emu, tools, options=SessionOptions(shutdown_grace=10)) as session:
            await session.send_text("go")
            await collect_until(session, lambda e: isinstance(e, ToolCallStarted))
            release.set()
        await session.aclose()  # a second close is harmless
        assert session.closed is not None

    responses = client_messages(emu, "toolResponse")
    assert responses[0]["functionResponses"][0]["response"] == {"output": 42}
    assert errors(emu) == []


# -- many sessions ------------------------------------------------------------------------------


async def test_fifty_sessions_with_tool_calls_in_every_turn() -> None:
    tools = livebridge.ToolRegistry()
    shared = anyio.CapacityLimiter(8)
    in_flight = 0
    peak = 0

    @tools.tool
    async def lookup(key: str) -> str:
        """Look a key up."""
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await anyio.sleep(0.01)
        in_flight -= 1
        return key[::-1]

    async def scenario(conv: Conversation) -> None:
        for turn in range(3):
            await conv.expect_turn()
            ids = await conv.tool_call([("lookup", {"key": f"k{turn}-{i}"}) for i in range(3)])
            await conv.wait_answers(ids)
            await conv.say(f"turn {turn}")
            await conv.turn_complete()

    settled: list[ToolCallSettled] = []
    policy = CallPolicy(limiter=shared)

    async def one_session(client: Any) -> None:
        async with LiveSession.connect(
            client, model=MODEL, tools=tools, config=TEXT_CONFIG, policy=policy
        ) as session:
            for turn in range(3):
                await session.send_text(f"turn {turn}")
                events = await collect_until(session, is_turn_complete, timeout=90)
                settled.extend(of_type(events, ToolCallSettled))

    async with Emulator(scenario) as emu:
        client = emu.client()
        async with anyio.create_task_group() as tg:
            for _ in range(50):
                tg.start_soon(one_session, client)

    assert len(settled) == 50 * 3 * 3
    assert all(e.outcome == "ok" for e in settled)
    assert peak <= 8
    assert len(client_messages(emu, "toolResponse")) == 50 * 3
    assert emu.violations == []
