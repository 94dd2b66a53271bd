"""Realistic behaviour of the emulated service, observed through the plain google-genai SDK."""

from __future__ import annotations

import time

import pytest
from google.genai import errors, types

from livebridge.emulator import Conversation, Emulator
from tests.support.gemini_clients import (
    MODEL,
    answer,
    next_message,
    pcm,
    tool_call,
    until_turn_complete,
    weather_config,
)
from tests.support.timing import seconds


async def test_default_model_calls_weather_per_city_and_speaks_answers(
    live_emulator: Emulator,
) -> None:
    client = live_emulator.client()
    config = weather_config(modality="AUDIO", output_audio_transcription={})
    async with client.aio.live.connect(model=MODEL, config=config) as session:
        await session.send_realtime_input(text="Weather in Tokyo and Paris?")
        call = await tool_call(session)
        cities = [(c.args or {}).get("city") for c in call.function_calls or []]
        assert cities == ["Tokyo", "Paris"]
        await session.send_tool_response(
            function_responses=[answer(c) for c in call.function_calls or []]
        )
        messages = await until_turn_complete(session)
    spoken = [
        m.server_content.output_transcription.text
        for m in messages
        if m.server_content and m.server_content.output_transcription
    ]
    audio = [m.data for m in messages if m.data]
    assert spoken == ["Tokyo: sunny in Tokyo; Paris: sunny in Paris."]
    assert audio and all(len(chunk) == 1920 for chunk in audio)
    assert messages[-1].usage_metadata is not None
    assert messages[-1].usage_metadata.total_token_count
    assert live_emulator.violations == []


async def test_blocking_call_holds_the_turn_until_answered() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.tool_call([("get_weather", {"city": "Paris"})])
        await conv.turn_complete()

    async with (
        Emulator(scenario) as emu,
        emu.client().aio.live.connect(model=MODEL, config=weather_config()) as session,
    ):
        await session.send_realtime_input(text="weather?")
        call = await tool_call(session)
        await session.send_tool_response(
            function_responses=[answer(c) for c in call.function_calls or []]
        )
        messages = await until_turn_complete(session)
        assert messages[-1].server_content and messages[-1].server_content.turn_complete
        answered_at = next(e.at for e in emu.transcript if "toolResponse" in e.message)
        completed_at = next(
            e.at for e in emu.transcript if e.message.get("serverContent", {}).get("turnComplete")
        )
        assert completed_at >= answered_at


async def test_unanswered_blocking_call_is_reissued_with_new_id() -> None:
    async with (
        Emulator(reissue_after=0.2) as emu,
        emu.client().aio.live.connect(model=MODEL, config=weather_config()) as session,
    ):
        await session.send_realtime_input(text="weather in Rome")
        first = await tool_call(session)
        second = await tool_call(session)
        assert first.function_calls and second.function_calls
        old, new = first.function_calls[0], second.function_calls[0]
        assert old.id != new.id and new.id and new.id.startswith("function-call-")
        assert (new.name, new.args) == (old.name, old.args)
        await session.send_tool_response(function_responses=[answer(new)])
        messages = await until_turn_complete(session)
        assert messages[-1].server_content and messages[-1].server_content.turn_complete
        assert emu.violations == []


@pytest.mark.parametrize("scheduling", ["INTERRUPT", "WHEN_IDLE", "SILENT"])
async def test_non_blocking_answers_follow_scheduling(scheduling: str) -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.tool_call([("get_weather", {"city": "Oslo"})])
        await conv.turn_complete()
        await conv.expect_turn()
        await conv.say("long story")
        await conv.speak(1.0)
        await conv.turn_complete()

    config = weather_config(behavior=types.Behavior.NON_BLOCKING)
    async with (
        Emulator(scenario) as emu,
        # The test stops reading while the model still talks: an unbounded client queue lets
        # the close handshake through instead of waiting out websockets' close_timeout.
        emu.client(async_client_args={"max_queue": None}).aio.live.connect(
            model=MODEL, config=config
        ) as session,
    ):
        await session.send_realtime_input(text="weather?")
        call = (await tool_call(session)).function_calls or []
        await until_turn_complete(session)
        await session.send_realtime_input(text="tell me a story")
        while not (await next_message(session)).text:
            pass
        await session.send_tool_response(
            function_responses=[
                answer(call[0], scheduling=types.FunctionResponseScheduling(scheduling))
            ]
        )
        emulated = emu.sessions[0]
        await emu.wait_for(lambda: bool(emulated.reports))
        if scheduling != "SILENT":
            await emu.wait_for(
                lambda: (
                    sum(
                        1
                        for e in emu.transcript
                        if e.message.get("serverContent", {}).get("turnComplete")
                    )
                    >= 3
                )
            )
        contents = [
            e.message.get("serverContent", {}) for e in emu.transcript if e.direction == "server"
        ]
        interrupted = any(c.get("interrupted") for c in contents)
        reported = [c for c in contents if "get_weather says" in str(c)]
        assert emulated.reports[0].scheduling == scheduling
        assert interrupted == (scheduling == "INTERRUPT")
        assert bool(reported) == (scheduling != "SILENT")
        if scheduling == "WHEN_IDLE":
            story_end = max(
                i
                for i, c in enumerate(contents)
                if c.get("modelTurn", {}).get("parts", [{}])[0].get("inlineData")
            )
            report_at = contents.index(reported[0])
            assert report_at > story_end
        assert emu.violations == []


async def test_will_continue_streams_every_part() -> None:
    received: dict[str, object] = {}

    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        (call_id,) = await conv.tool_call([("get_weather", {"city": "Oslo"})])
        await conv.turn_complete()
        received.update(await conv.wait_answers([call_id], timeout=10))
        await conv.say("noted")  # a state change: wakes emu.wait_for

    config = weather_config(behavior=types.Behavior.NON_BLOCKING)
    async with (
        Emulator(scenario) as emu,
        emu.client().aio.live.connect(model=MODEL, config=config) as session,
    ):
        await session.send_realtime_input(text="weather?")
        call = ((await tool_call(session)).function_calls or [])[0]
        silent = types.FunctionResponseScheduling.SILENT
        for part in ("rain", "sun"):
            await session.send_tool_response(
                function_responses=[
                    types.FunctionResponse(
                        id=call.id,
                        name=call.name,
                        response={"output": part},
                        will_continue=True,
                        scheduling=silent,
                    )
                ]
            )
        await session.send_tool_response(
            function_responses=[
                types.FunctionResponse(
                    id=call.id,
                    name=call.name,
                    response={},
                    will_continue=False,
                    scheduling=silent,
                )
            ]
        )
        await emu.wait_for(lambda: bool(received))
    (record,) = received.values()
    assert [p.get("response") for p in record.parts] == [{"output": "rain"}, {"output": "sun"}, {}]  # type: ignore[attr-defined]
    assert emu.violations == []


async def test_activity_start_barges_in_and_cancels_pending_calls() -> None:
    async with (
        Emulator() as emu,
        emu.client().aio.live.connect(model=MODEL, config=weather_config()) as session,
    ):
        await session.send_realtime_input(text="weather in Paris and Rome")
        call = await tool_call(session)
        ids = [c.id for c in call.function_calls or []]
        await session.send_realtime_input(activity_start=types.ActivityStart())
        seen = [await next_message(session) for _ in range(3)]
        assert seen[0].server_content and seen[0].server_content.interrupted
        assert seen[1].tool_call_cancellation and seen[1].tool_call_cancellation.ids == ids
        assert seen[2].server_content and seen[2].server_content.turn_complete
        assert emu.sessions[0].pending_calls == []


async def test_loud_audio_while_model_speaks_interrupts() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.speak(5.0)
        await conv.turn_complete()

    async with Emulator(scenario) as emu:
        client = emu.client()
        config = types.LiveConnectConfig(response_modalities=[types.Modality.AUDIO])
        async with client.aio.live.connect(model=MODEL, config=config) as session:
            await session.send_realtime_input(text="talk")
            while not (await next_message(session)).data:
                pass
            silence = types.Blob(data=pcm(0.1, loud=False), mime_type="audio/pcm;rate=16000")
            await session.send_realtime_input(audio=silence)
            speech = types.Blob(data=pcm(0.1, loud=True), mime_type="audio/pcm;rate=16000")
            await session.send_realtime_input(audio=speech)
            start = time.monotonic()
            while not (
                (message := await next_message(session)).server_content
                and message.server_content.interrupted
            ):
                pass
            assert time.monotonic() - start < seconds(4.0)


async def test_audio_turn_ends_on_silence_and_default_model_answers() -> None:
    async with Emulator() as emu:
        config = weather_config(input_audio_transcription={})
        async with emu.client().aio.live.connect(model=MODEL, config=config) as session:
            for loud in (True, False):
                blob = types.Blob(data=pcm(0.6, loud=loud), mime_type="audio/pcm;rate=16000")
                await session.send_realtime_input(audio=blob)
            call = await tool_call(session)
            assert [(c.args or {}).get("city") for c in call.function_calls or []] == [
                "Paris",
                "Tokyo",
            ]
            await session.send_tool_response(
                function_responses=[answer(c) for c in call.function_calls or []]
            )
            messages = await until_turn_complete(session)
        assert "Paris: sunny in Paris" in "".join(m.text or "" for m in messages)
        heard = [e for e in emu.transcript if "inputTranscription" in str(e.message)]
        assert heard


async def test_resumption_handles() -> None:
    handles: list[str | None] = []

    async def scenario(conv: Conversation) -> None:
        if conv.resumed_from is not None:
            handles.append(conv.resumed_from)
            await conv.say("welcome back")  # a state change: wakes emu.wait_for
            return
        await conv.expect_turn()
        ids = await conv.tool_call([("get_weather", {"city": "Paris"})])
        handles.append(await conv.resumption_update())
        await conv.wait_answers(ids)
        await conv.turn_complete()
        handles.append(await conv.resumption_update())
        await conv.say("done")

    config = weather_config(session_resumption=types.SessionResumptionConfig())
    async with Emulator(scenario) as emu:
        client = emu.client()
        async with client.aio.live.connect(model=MODEL, config=config) as session:
            await session.send_realtime_input(text="weather")
            call = ((await tool_call(session)).function_calls or [])[0]
            update = await next_message(session)
            assert update.session_resumption_update is not None
            assert update.session_resumption_update.resumable is False
            await session.send_tool_response(function_responses=[answer(call)])
            await emu.wait_for(lambda: len(handles) == 2)
        assert handles[0] is None and handles[1] is not None
        handle = handles[1]
        resume = weather_config(session_resumption=types.SessionResumptionConfig(handle=handle))
        async with client.aio.live.connect(model=MODEL, config=resume):
            await emu.wait_for(lambda: len(handles) == 3)
        resumed = emu.sessions[1]
        assert resumed.resumed_from == handle == handles[2]
        assert set(resumed.checker.calls) == {call.id}
        assert resumed.checker.calls[str(call.id)].state == "answered"
        stale = weather_config(session_resumption=types.SessionResumptionConfig(handle="nope"))
        with pytest.raises(errors.APIError) as closed:
            async with client.aio.live.connect(model=MODEL, config=stale):
                pass
        assert closed.value.code == 1008
        assert closed.value.details == "BidiGenerateContent session not found"


async def test_go_away_then_deadline_close() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.go_away("0.3s")

    async with Emulator(scenario) as emu, emu.client().aio.live.connect(model=MODEL) as session:
        message = await next_message(session)
        assert message.go_away and message.go_away.time_left == "0.3s"
        with pytest.raises(errors.APIError) as closed:
            await next_message(session)
    assert closed.value.code == 1011
    assert closed.value.details == "Deadline expired before operation could complete."


async def test_close_reason_is_capped_at_123_bytes_utf8_safe() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.close(1008, "é" * 100)

    async with Emulator(scenario) as emu, emu.client().aio.live.connect(model=MODEL) as session:
        with pytest.raises(errors.APIError) as closed:
            await next_message(session)
    assert closed.value.code == 1008
    assert closed.value.details == "é" * 61


async def test_malformed_message_closes_1007_like_the_service(live_emulator: Emulator) -> None:
    async with live_emulator.client().aio.live.connect(model=MODEL) as session:
        await session._ws.send(
            '{"tool_response": {"function_responses": [{"id": "x", "bogus": 1}]}}'
        )
        with pytest.raises(errors.APIError) as closed:
            await next_message(session)
    assert closed.value.code == 1007
    assert closed.value.details == (
        'Invalid JSON payload received. Unknown name "bogus" at '
        "'tool_response.function_responses[0]': Cannot find field."
    )
    assert [v.kind for v in live_emulator.violations] == ["malformed_message"]


async def test_scenario_usage_goes_with_turn_complete() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.say("hi")
        await conv.turn_complete(
            usage={"promptTokenCount": 100, "responseTokenCount": 20, "totalTokenCount": 120}
        )

    async with Emulator(scenario) as emu:
        config = types.LiveConnectConfig(response_modalities=[types.Modality.TEXT])
        async with emu.client().aio.live.connect(model=MODEL, config=config) as session:
            await session.send_client_content(
                turns=types.Content(role="user", parts=[types.Part(text="hi")])
            )
            messages = await until_turn_complete(session)
    last = messages[-1]
    assert last.server_content and last.server_content.turn_complete
    assert last.usage_metadata and last.usage_metadata.total_token_count == 120
