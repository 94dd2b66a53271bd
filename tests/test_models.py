"""The contract on each model people run: a real LiveSession through google-genai (Developer API
and Vertex AI express mode) against an emulator that behaves as that model's profile says."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import anyio
import pytest
from google.genai import types

import livebridge
from livebridge import LiveSession, ModelCapabilityError, SessionOptions, ToolRegistry
from livebridge.emulator import Conversation, Emulator, Faults
from livebridge.profiles import profile_for
from livebridge.protocol.events import TextOut, ToolCallSettled, ToolCallStarted, TurnComplete
from livebridge.recording.replay import replay
from tests.support.gemini_sessions import TEXT_CONFIG, client_messages, collect_until, of_type
from tests.support.timing import seconds

GEMINI_38 = "gemini-3.8-live"
GEMINI_31 = "gemini-3.1-flash-live-preview"  # on Vertex: calls without ids
GEMINI_25 = "gemini-2.5-flash-native-audio-preview-09-2025"
THINKING = "gemini-3.8-live-extended-thinking"


def violations(emu: Emulator) -> list[str]:
    """Every violation, warnings included: a session on its profile must leave none."""
    return [f"{v.severity} {v.kind}: {v.message}" for v in emu.violations]


def setup_declarations(emu: Emulator) -> dict[str, str | None]:
    (setup,) = client_messages(emu, "setup")
    return {
        d["name"]: d.get("behavior")
        for tool in setup.get("tools", [])
        for d in tool.get("functionDeclarations", [])
    }


def place_tools() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool
    async def get_weather(city: str) -> dict[str, str]:
        """Weather for a city."""
        return {"city": city, "sky": "sunny"}

    @tools.tool(behavior="NON_BLOCKING")
    async def book_tour(city: str) -> dict[str, str]:
        """Book a guided tour."""
        return {"city": city, "tour": "booked"}

    return tools


@pytest.mark.parametrize("model", [GEMINI_38, GEMINI_25])
async def test_default_and_non_blocking_tools_mean_the_same_on_every_model(model: str) -> None:
    """The wire states each behavior, and the session groups answers as it declared them."""
    async with (
        Emulator() as emu,
        LiveSession.connect(
            emu.client(), model=model, tools=place_tools(), config=TEXT_CONFIG
        ) as session,
    ):
        await session.send_text("Weather in Oslo and Lisbon?")
        events = await collect_until(
            session, lambda e: isinstance(e, TextOut) and "book_tour says" in e.text
        )
        await collect_until(session, lambda e: isinstance(e, TurnComplete))
        assert {c.call_id: c.behavior for c in of_type(events, ToolCallStarted)}
    assert setup_declarations(emu) == {"get_weather": "BLOCKING", "book_tour": "NON_BLOCKING"}
    (connection,) = emu.sessions
    assert connection.profile.family == profile_for(model, "developer").family
    blocking = {r.name: r.blocking for r in connection.checker.calls.values()}
    assert blocking == {"get_weather": True, "book_tour": False}  # as the service takes them
    started = of_type(events, ToolCallStarted)
    assert {(e.name, e.behavior) for e in started} == {
        ("get_weather", "BLOCKING"),
        ("book_tour", "NON_BLOCKING"),
    }
    responses = client_messages(emu, "toolResponse")
    weather = [[a for a in r["functionResponses"] if a["name"] == "get_weather"] for r in responses]
    (both,) = [answers for answers in weather if answers]  # the blocking batch: one message
    assert len(both) == 2
    assert all("scheduling" not in answer and "willContinue" not in answer for answer in both)
    assert violations(emu) == []


async def test_an_undeclared_function_on_38_is_what_the_checker_warns_about() -> None:
    """The emulator, as 3.8, takes a declaration without ``behavior`` as NON_BLOCKING and says
    so: a client that trusts the old default would answer it as BLOCKING."""
    async with Emulator(model=GEMINI_38) as emu:
        config = types.LiveConnectConfig(
            response_modalities=[types.Modality.TEXT],
            tools=[
                types.Tool(
                    function_declarations=[
                        types.FunctionDeclaration(
                            name="get_weather", parameters_json_schema={"type": "object"}
                        )
                    ]
                )
            ],
        )
        async with emu.client().aio.live.connect(model=GEMINI_25, config=config):
            await emu.wait_for(lambda: bool(emu.violations))
    (warning,) = emu.violations
    assert (warning.kind, warning.severity) == ("undeclared_behavior", "warning")
    assert "takes as NON_BLOCKING" in warning.message
    assert not emu.sessions[0].is_blocking("get_weather")


async def test_nameless_vertex_calls_are_answered_by_name_in_call_order() -> None:
    """Three calls without ids, two to one function, settling out of order: one toolResponse,
    no ids, names in call order, each answer where the service will match it."""
    finished: list[str] = []
    tools = ToolRegistry()
    lisbon_done = anyio.Event()

    @tools.tool
    async def get_weather(city: str) -> dict[str, str]:
        if city == "Oslo":
            await lisbon_done.wait()  # the first call settles last
        finished.append(city)
        if city == "Lisbon":
            lisbon_done.set()
        return {"city": city}

    @tools.tool
    async def get_time(city: str) -> dict[str, str]:
        return {"time": "12:00", "city": city}

    answers: dict[str, Any] = {}

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        keys = await conv.tool_call(
            [
                ("get_weather", {"city": "Oslo"}),
                ("get_time", {"city": "Oslo"}),
                ("get_weather", {"city": "Lisbon"}),
            ]
        )
        got = await conv.wait_answers(keys, timeout=10)
        answers.update(
            {
                conv.known_calls[k].args["city"] + ":" + conv.known_calls[k].name: got[k].response
                for k in keys
            }
        )
        await conv.say("done")
        await conv.turn_complete()

    async with (
        Emulator(scenario) as emu,
        LiveSession.connect(
            emu.client(vertexai=True), model=GEMINI_31, tools=tools, config=TEXT_CONFIG
        ) as session,
    ):
        await session.send_text("go")
        events = await collect_until(session, lambda e: isinstance(e, TurnComplete))
    assert finished == ["Lisbon", "Oslo"]
    (call,) = [e.message["toolCall"] for e in emu.transcript if "toolCall" in e.message]
    assert all("id" not in c for c in call["functionCalls"])  # Vertex sends none
    (response,) = client_messages(emu, "toolResponse")
    sent = response["functionResponses"]
    assert [a["name"] for a in sent] == ["get_weather", "get_time", "get_weather"]
    assert all("id" not in a for a in sent), "the session's own keys never go on the wire"
    assert answers == {
        "Oslo:get_weather": {"output": {"city": "Oslo"}},
        "Oslo:get_time": {"output": {"time": "12:00", "city": "Oslo"}},
        "Lisbon:get_weather": {"output": {"city": "Lisbon"}},
    }
    started = of_type(events, ToolCallStarted)
    assert [e.call_id for e in started] == ["nameless-call-1", "nameless-call-2", "nameless-call-3"]
    assert [e.outcome for e in of_type(events, ToolCallSettled)] == ["ok"] * 3
    assert violations(emu) == []


async def test_a_streaming_tool_on_vertex_answers_once_without_will_continue() -> None:
    tools = ToolRegistry()

    @tools.tool(behavior="NON_BLOCKING")
    async def book_tour(city: str) -> AsyncIterator[dict[str, str]]:
        yield {"status": "searching", "city": city}
        yield {"status": "booked", "city": city}

    async with (
        Emulator() as emu,
        LiveSession.connect(
            emu.client(vertexai=True), model=GEMINI_25, tools=tools, config=TEXT_CONFIG
        ) as session,
    ):
        await session.send_text("A tour of Oslo?")
        events = await collect_until(
            session, lambda e: isinstance(e, TextOut) and "book_tour says" in e.text
        )
    (response,) = client_messages(emu, "toolResponse")
    (answer,) = response["functionResponses"]
    assert "willContinue" not in answer and "id" not in answer
    assert answer["response"] == {
        "output": [
            {"status": "searching", "city": "Oslo"},
            {"status": "booked", "city": "Oslo"},
        ]
    }
    assert [e.outcome for e in of_type(events, ToolCallSettled)] == ["ok"]
    assert violations(emu) == []


async def test_what_a_model_cannot_do_fails_at_connect_before_any_socket() -> None:
    tools = place_tools()

    @tools.tool(behavior="BLOCKING")
    async def pay(amount: int) -> int:
        return amount

    async with Emulator() as emu:
        with pytest.raises(ModelCapabilityError) as raised:
            async with LiveSession.connect(
                emu.client(), model=THINKING, tools=tools, config=TEXT_CONFIG
            ):
                pass
        assert "'pay'" in str(raised.value) and THINKING in str(raised.value)
        with pytest.raises(ModelCapabilityError, match="'notify' asks for scheduling"):
            scheduled = ToolRegistry()

            @scheduled.tool(behavior="NON_BLOCKING", scheduling="WHEN_IDLE")
            async def notify(text: str) -> str:
                return text

            async with LiveSession.connect(
                emu.client(vertexai=True), model=GEMINI_25, tools=scheduled, config=TEXT_CONFIG
            ):
                pass
        assert emu.connections == []  # refused before any socket opened


async def test_extended_thinking_runs_default_tools_non_blocking() -> None:
    async with (
        Emulator() as emu,
        LiveSession.connect(
            emu.client(), model=THINKING, tools=place_tools(), config=TEXT_CONFIG
        ) as session,
    ):
        await session.send_text("Weather in Oslo?")
        events = await collect_until(
            session,
            lambda e: isinstance(e, ToolCallSettled) and e.name == "get_weather",
        )
        await collect_until(
            session, lambda e: isinstance(e, TextOut) and "get_weather says" in e.text
        )
    assert setup_declarations(emu) == {"get_weather": "NON_BLOCKING", "book_tour": "NON_BLOCKING"}
    assert {e.behavior for e in of_type(events, ToolCallStarted)} == {"NON_BLOCKING"}
    for message in client_messages(emu, "toolResponse"):
        assert all(answer["name"] for answer in message["functionResponses"])
    assert violations(emu) == []


async def test_extended_thinking_refuses_a_blocking_declaration_as_the_service_does() -> None:
    """A client that declares BLOCKING anyway (not livebridge) is refused at setup."""
    declaration = types.FunctionDeclaration(name="pay", behavior=types.Behavior.BLOCKING)
    config = types.LiveConnectConfig(
        response_modalities=[types.Modality.TEXT],
        tools=[types.Tool(function_declarations=[declaration])],
    )
    async with Emulator() as emu:
        with pytest.raises(Exception) as raised:
            async with emu.client().aio.live.connect(model=THINKING, config=config) as session:
                async for _ in session.receive():
                    pass
    assert "1007" in str(raised.value) and "NON_BLOCKING calls only" in str(raised.value)
    assert [v.kind for v in emu.violations] == ["unsupported_behavior"]


@pytest.mark.parametrize("cancellation", ["sent", "lost"])
async def test_new_input_cancels_a_blocking_call_on_38(cancellation: str) -> None:
    """On 3.8 new input cancels a running BLOCKING call: its fate is ``cancelled``, its
    handler is cancelled and nothing is sent for it, also when no toolCallCancellation comes."""
    tools = ToolRegistry()
    started = anyio.Event()
    cancelled = anyio.Event()

    @tools.tool
    async def get_weather(city: str) -> dict[str, str]:
        started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise
        return {"city": city}

    faults = Faults()
    if cancellation == "lost":
        faults = Faults(drop=lambda message: "toolCallCancellation" in message)
    async with (
        Emulator(faults=faults) as emu,
        LiveSession.connect(
            emu.client(), model=GEMINI_38, tools=tools, config=TEXT_CONFIG
        ) as session,
    ):
        await session.send_text("Weather in Oslo?")
        with anyio.fail_after(seconds(10)):
            await started.wait()
        await session.send_text("never mind")
        events = await collect_until(
            session, lambda e: isinstance(e, TextOut) and "You said: never mind" in e.text
        )
        with anyio.fail_after(seconds(10)):
            await cancelled.wait()
    (settled,) = of_type(events, ToolCallSettled)
    assert settled.ending == "cancelled" and settled.turnaround is None
    assert settled.reason is not None and "new input" in settled.reason
    assert client_messages(emu, "toolResponse") == []
    (record,) = emu.sessions[0].checker.calls.values()
    assert record.state == "cancelled"
    assert violations(emu) == []


async def test_the_same_text_waits_for_the_answer_on_25() -> None:
    """On 2.5 new input does not cancel: the call is answered and the text is heard after."""
    tools = ToolRegistry()
    started = anyio.Event()
    release = anyio.Event()

    @tools.tool
    async def get_weather(city: str) -> dict[str, str]:
        started.set()
        await release.wait()
        return {"city": city}

    async with (
        Emulator() as emu,
        LiveSession.connect(
            emu.client(), model=GEMINI_25, tools=tools, config=TEXT_CONFIG
        ) as session,
    ):
        await session.send_text("Weather in Oslo?")
        with anyio.fail_after(seconds(10)):
            await started.wait()
        await session.send_text("never mind")
        release.set()
        events = await collect_until(
            session, lambda e: isinstance(e, TextOut) and "You said: never mind" in e.text
        )
    assert [e.outcome for e in of_type(events, ToolCallSettled)] == ["ok"]
    assert len(client_messages(emu, "toolResponse")) == 1
    assert violations(emu) == []


async def test_an_unknown_model_warns_once_and_a_profile_overrides(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tools = place_tools()
    async with Emulator(model=GEMINI_38) as emu:
        with caplog.at_level(logging.WARNING, "livebridge.profiles"):
            async with LiveSession.connect(
                emu.client(), model="gemini-live-next", tools=tools, config=TEXT_CONFIG
            ):
                pass
        assert sum("'gemini-live-next'" in r.getMessage() for r in caplog.records) == 1
        # The app knows better than the table: the same unknown name, as 3.8 extended thinking.
        thinking = replace(profile_for(THINKING, "developer"), family="gemini-live-next")
        options = SessionOptions(profile=thinking)
        with pytest.raises(ModelCapabilityError):
            blocking = ToolRegistry()

            @blocking.tool(behavior="BLOCKING")
            async def pay(amount: int) -> int:
                return amount

            async with LiveSession.connect(
                emu.client(), model="gemini-live-next", tools=blocking, options=options
            ):
                pass
        async with LiveSession.connect(
            emu.client(),
            model="gemini-live-next",
            tools=tools,
            config=TEXT_CONFIG,
            options=options,
        ) as session:
            assert session.closed is None
    assert [
        d["behavior"] for d in client_messages(emu, "setup")[-1]["tools"][0]["functionDeclarations"]
    ] == ["NON_BLOCKING", "NON_BLOCKING"]
    assert livebridge.ModelProfile is type(thinking)  # the public name


async def test_a_vertex_recording_replays_by_name(tmp_path: Any) -> None:
    """A recorded Vertex session (calls and answers without ids) replays with zero divergence,
    and a tool that now fails is reported against its recorded call."""
    path = tmp_path / "vertex.jsonl"
    async with (
        Emulator() as emu,
        LiveSession.connect(
            emu.client(vertexai=True),
            model=GEMINI_31,
            tools=place_tools(),
            config=TEXT_CONFIG,
            options=SessionOptions(record=str(path)),
        ) as session,
    ):
        await session.send_text("Weather in Oslo and Lisbon?")
        await collect_until(session, lambda e: isinstance(e, TurnComplete))
    assert violations(emu) == []
    recorded = path.read_text()
    assert '"functionCalls"' in recorded and '"id"' not in recorded.split('"functionCalls"')[1]

    report = await replay(path, place_tools())
    assert report.divergences == [] and report.answers >= 2

    broken = ToolRegistry()

    @broken.tool
    async def get_weather(city: str) -> dict[str, str]:
        raise RuntimeError("the weather feed is down")

    @broken.tool(behavior="NON_BLOCKING")
    async def book_tour(city: str) -> dict[str, str]:
        return {"city": city, "tour": "booked"}

    report = await replay(path, broken)
    changed = [d for d in report.divergences if d.kind == "kind_changed"]
    assert {d.call_id for d in changed} <= {"nameless-call-1", "nameless-call-2", "nameless-call-3"}
    assert len(changed) == 2 and all(d.function == "get_weather" for d in changed)
