"""The emulator blames no correct client: what the frameworks users run do, on each model.

Each test drives the google-genai client (or a raw socket) the way a framework does, on the
model whose behaviour that framework relies on, and expects no violation (or exactly the fault
the client makes).
"""

from __future__ import annotations

import asyncio
import json

from google.genai import live, types
from openai.types.realtime import RealtimeErrorEvent

from livebridge.demo.phone import PhoneScript
from livebridge.emulator import Emulator, RuleModel, Violation
from livebridge.emulator.gemini.checker import Checker
from livebridge.vendors.gemini import wire
from tests.support.gemini_clients import answer, next_message, pcm, weather_config
from tests.support.gemini_clients import tool_call as next_tool_call
from tests.support.realtime_clients import (
    THREE_CITIES,
    ask,
    calls,
    configure,
    done,
    kinds,
    response,
    until,
)
from tests.support.realtime_clients import (
    answer as output,
)
from tests.support.timing import seconds

NATIVE_AUDIO = "gemini-2.5-flash-native-audio-preview-09-2025"


async def calls_until_turn_complete(session: live.AsyncSession) -> list[types.FunctionCall]:
    """ADK's pattern on native audio: buffer the turn's calls until ``turnComplete``."""
    calls: list[types.FunctionCall] = []
    while True:
        message = await next_message(session)
        if message.tool_call is not None:
            calls.extend(message.tool_call.function_calls or [])
        if message.server_content is not None and message.server_content.turn_complete:
            return calls


async def test_native_audio_25_ends_its_turn_right_after_a_blocking_call() -> None:
    """ADK runs a 2.5 model's tools only once ``turnComplete`` came: it gets it, at once."""
    config = weather_config(types.Behavior.BLOCKING)
    async with (
        Emulator() as emu,
        emu.client().aio.live.connect(model=NATIVE_AUDIO, config=config) as session,
    ):
        await session.send_client_content(
            turns=types.Content(role="user", parts=[types.Part(text="Weather in Paris and Oslo?")]),
            turn_complete=True,
        )
        calls = await asyncio.wait_for(calls_until_turn_complete(session), seconds(5))
        assert [call.args for call in calls] == [{"city": "Paris"}, {"city": "Oslo"}]
        await session.send_tool_response(function_responses=[answer(call) for call in calls])
        spoken = [m.text async for m in session.receive() if m.text]
        assert "sunny in Oslo" in "".join(spoken)
    assert emu.violations == []


async def test_a_3x_history_seed_waits_for_the_realtime_input_that_starts_the_turn() -> None:
    """Pipecat on 3.x: the history seed ends with ``turnComplete`` and starts nothing; its
    ``realtimeInput`` text " " starts the turn, which answers the seed's last question."""
    config = weather_config(
        types.Behavior.BLOCKING,
        history_config=types.HistoryConfig(initial_history_in_client_content=True),
    )
    async with (
        Emulator() as emu,
        emu.client().aio.live.connect(model="gemini-3.8-live", config=config) as session,
    ):
        seed: list[types.Content | types.ContentDict] = [
            types.Content(role="user", parts=[types.Part(text="Hello there.")]),
            types.Content(role="model", parts=[types.Part(text="Hi! How can I help?")]),
            types.Content(role="user", parts=[types.Part(text="Weather in Paris and Oslo?")]),
        ]
        await session.send_client_content(turns=seed, turn_complete=True)
        await session.send_realtime_input(text=" ")
        call = await asyncio.wait_for(next_tool_call(session), seconds(5))
        calls = call.function_calls or []
        assert [c.args for c in calls] == [{"city": "Paris"}, {"city": "Oslo"}]
        await session.send_tool_response(function_responses=[answer(c) for c in calls])
        spoken = [m.text async for m in session.receive() if m.text]
        assert "sunny in Oslo" in "".join(spoken)
    assert emu.violations == []


async def test_the_rule_model_takes_its_time_to_first_output() -> None:
    """A configurable time to first output: a race between the client's input and the
    model's answer shows, as it would against the service."""
    loop = asyncio.get_running_loop()
    config = weather_config(types.Behavior.BLOCKING)
    async with (
        Emulator(RuleModel(first_output=0.5)) as emu,
        emu.client().aio.live.connect(model="gemini-3.8-live", config=config) as session,
    ):
        asked = loop.time()
        await session.send_realtime_input(text="Weather in Lima?")
        call = await next_tool_call(session)
        assert loop.time() - asked >= 0.5
        await session.send_tool_response(
            function_responses=[answer(c) for c in call.function_calls or []]
        )
        [m async for m in session.receive()]
    assert emu.violations == []


async def test_a_loop_answering_each_call_alone_then_crashing_is_serial_and_unanswered() -> None:
    """A genai loop awaiting each call and answering it in its own message, whose third tool
    raises and takes the client down: serial, split, crashed, and the call left unanswered."""
    config = weather_config(types.Behavior.BLOCKING)
    async with Emulator() as emu:
        async with emu.client().aio.live.connect(model="gemini-3.8-live", config=config) as session:
            await session.send_realtime_input(text="Weather in Paris, Oslo and Lima?")
            calls = (await next_tool_call(session)).function_calls or []
            assert len(calls) == 3
            for call in calls[:2]:
                await asyncio.sleep(0.3)  # the tool's own time: the loop awaits it
                await session.send_tool_response(function_responses=[answer(call)])
            await session._ws.close(1011, "get_weather('Lima') raised")
        await emu.settled()
        found = [(v.kind, v.severity) for v in emu.violations]
    assert found == [
        ("split_batch", "warning"),
        ("serial_answers", "warning"),
        ("client_crash", "error"),
        ("unanswered", "error"),
    ]
    assert (calls[2].id or "?") in emu.violations[-1].message


def test_pipecats_failure_text_is_opaque_even_on_an_answer_not_admitted() -> None:
    """Pipecat answers a raising tool with ``{"value": "The function … failed and returned no
    result."}``, cancelled calls included: the payload is judged either way."""
    found: list[Violation] = []
    checker = Checker("s1", found.append)
    batch = checker.issue([("c0", "get_weather", {"city": "Oslo"}, True)])
    checker.read(batch)
    checker.cancel(["c0"])
    checker.cancellation_read(["c0"])
    failed = "The function `get_weather` failed and returned no result."
    response = wire.FunctionResponse(id="c0", name="get_weather", response={"value": failed})
    checker.on_tool_response({"toolResponse": {}}, [response])
    assert [v.kind for v in found] == ["cancelled_id", "opaque_error"]


async def test_openai_refuses_a_session_field_it_does_not_have() -> None:
    """The GA session schema is strict: ``unknown_parameter``, naming the field."""
    async with Emulator(protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model="gpt-realtime") as conn:
            assert (await conn.recv()).type == "session.created"
            session = {"type": "realtime", "bogus_field": 1}
            await conn.session.update(session=session)
            error = await until(conn, "error")
            assert isinstance(error, RealtimeErrorEvent)
            assert (error.error.code, error.error.param) == (
                "unknown_parameter",
                "session.bogus_field",
            )
        await emu.settled()
        assert [v.kind for v in emu.violations] == ["invalid_event"]


async def test_openai_without_parallel_tool_calls_calls_one_tool_per_response() -> None:
    """``parallel_tool_calls: false`` (gpt-realtime-2): one ``function_call`` per response;
    the next comes in the response the client's ``response.create`` opens after the output."""
    async with Emulator(protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model="gpt-realtime-2") as conn:
            await configure(conn, parallel_tool_calls=False)
            await ask(conn, THREE_CITIES)
            asked = []
            for _ in range(3):
                (call,) = calls(await response(conn))
                asked.append(json.loads(call.arguments)["city"])
                await output(conn, call)
                await conn.response.create()
            last = await response(conn)
            assert calls(last) == []
            assert done(last).response.status == "completed"
        assert asked == ["Oslo", "Lisbon", "Paris"]
        assert kinds(emu) == []


async def test_38_on_vertex_sends_calls_with_ids_and_takes_answers_by_them() -> None:
    """gemini-3.8-live on Vertex AI: calls carry ids, and the SDK's answers echo them."""
    config = weather_config(types.Behavior.BLOCKING)
    async with (
        Emulator() as emu,
        emu.client(vertexai=True).aio.live.connect(
            model="gemini-3.8-live", config=config
        ) as session,
    ):
        await session.send_realtime_input(text="Weather in Paris and Oslo?")
        calls = (await next_tool_call(session)).function_calls or []
        assert len(calls) == 2 and all(call.id for call in calls)
        await session.send_tool_response(function_responses=[answer(call) for call in calls])
        [m async for m in session.receive()]
        (connection,) = emu.sessions
        assert connection.backend == "vertex"
    assert emu.violations == []


THINKING = "gemini-3.8-live-extended-thinking"
THINK = types.ThinkingConfig(thinking_level=types.ThinkingLevel.LOW)


async def test_extended_thinking_says_when_it_is_idle_and_ignores_scheduling() -> None:
    """``interactionStatus`` with every ``turnComplete``: IN_PROGRESS while the NON_BLOCKING
    call runs, IDLE once its answer is reported, so google-genai's ``receive()`` (and Pipecat,
    which gates turns on it) reads the whole exchange; ``scheduling`` is not obeyed."""
    config = weather_config(types.Behavior.NON_BLOCKING, thinking_config=THINK)
    statuses: list[str | None] = []
    texts: list[str] = []
    async with (
        Emulator() as emu,
        emu.client().aio.live.connect(model=THINKING, config=config) as session,
    ):
        await session.send_realtime_input(text="Weather in Oslo?")
        async for message in session.receive():  # up to IDLE
            if message.tool_call is not None:
                (call,) = message.tool_call.function_calls or []
                interrupt = types.FunctionResponseScheduling.INTERRUPT
                await session.send_tool_response(
                    function_responses=[answer(call, scheduling=interrupt)]
                )
            content = message.server_content
            if content is not None and content.turn_complete:
                status = content.interaction_status
                statuses.append(status.value if status is not None else None)
            texts.append(message.text or "")
        (connection,) = emu.sessions
    assert statuses == ["IN_PROGRESS", "IDLE"]
    assert "get_weather says sunny in Oslo" in "".join(texts)
    assert [r.scheduling for r in connection.reports] == ["WHEN_IDLE"]
    assert [(v.kind, v.severity) for v in emu.violations] == [("unsupported_field", "warning")]


async def test_extended_thinking_refuses_a_setup_without_a_thinking_level() -> None:
    config = weather_config(types.Behavior.NON_BLOCKING)
    async with Emulator() as emu:
        try:
            async with emu.client().aio.live.connect(model=THINKING, config=config) as session:
                await next_message(session)
        except Exception as error:  # the SDK's APIError for the 1007 close
            assert "thinking_level" in str(error)
        else:
            raise AssertionError("the setup was accepted")
        await emu.settled()
        assert [v.kind for v in emu.violations] == ["malformed_message"]


async def test_the_rule_model_hears_the_phrases_its_scenario_scripts() -> None:
    """What a simulated caller says is scripted per scenario: each audio turn is heard as the
    script's next phrase, never as another scenario's words."""
    script = ("What's the weather in Paris and Oslo?", "And in Lima?")
    config = weather_config(
        types.Behavior.BLOCKING, input_audio_transcription=types.AudioTranscriptionConfig()
    )
    speech = types.Blob(data=pcm(0.4, loud=True), mime_type="audio/pcm;rate=16000")
    silence = types.Blob(data=pcm(0.6, loud=False), mime_type="audio/pcm;rate=16000")
    heard: list[str] = []
    asked: list[list[str]] = []
    async with (
        Emulator(RuleModel(heard=script)) as emu,
        emu.client().aio.live.connect(model="gemini-3.8-live", config=config) as session,
    ):
        for _ in script:
            await session.send_realtime_input(audio=speech)
            await session.send_realtime_input(audio=silence)
            async for message in session.receive():
                content = message.server_content
                if content is not None and content.input_transcription is not None:
                    heard.append(content.input_transcription.text or "")
                if message.tool_call is not None:
                    calls = message.tool_call.function_calls or []
                    asked.append([(c.args or {}).get("city", "") for c in calls])
                    await session.send_tool_response(function_responses=[answer(c) for c in calls])
    assert heard == list(script)
    assert asked == [["Paris", "Oslo"], ["Lima"]]
    assert emu.violations == []


def test_the_phone_script_hears_what_its_own_caller_asks() -> None:
    """The phone demo's words belong to its script: other places, another question."""
    assert PhoneScript(places=("Paris", "Oslo")).question == "What's the weather in Paris and Oslo?"
    assert PhoneScript().question == "What's the weather in Paris and Tokyo?"
