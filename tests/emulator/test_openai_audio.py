"""Audio over OpenAI Realtime: server turn detection, barge-in during a call, the model's audio,
and the client's own cancel and truncate."""

from __future__ import annotations

import asyncio
import base64

from openai.types.realtime import (
    InputAudioBufferSpeechStartedEvent,
    RealtimeErrorEvent,
    ResponseAudioDeltaEvent,
    ResponseDoneEvent,
)

from livebridge.emulator import Conversation, Emulator
from tests.support.gemini_clients import pcm
from tests.support.realtime_clients import (
    MODEL,
    answer,
    calls,
    configure,
    done,
    kinds,
    response,
    until,
)

RATE = 24_000


def audio(seconds: float, loud: bool) -> str:
    return base64.b64encode(pcm(seconds, loud, RATE)).decode()


async def test_speech_then_silence_is_a_turn_the_server_answers_by_itself() -> None:
    async with Emulator(protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(
                conn,
                output_modalities=["audio"],
                audio={"input": {"transcription": {"model": "whisper-1"}}},
            )
            await conn.input_audio_buffer.append(audio=audio(0.3, loud=True))
            started = await until(conn, "input_audio_buffer.speech_started")
            assert isinstance(started, InputAudioBufferSpeechStartedEvent)
            assert started.audio_start_ms == 0
            await conn.input_audio_buffer.append(audio=audio(0.6, loud=False))
            stopped = await until(conn, "input_audio_buffer.speech_stopped")
            committed = await until(conn, "input_audio_buffer.committed")
            assert getattr(stopped, "item_id", None) == getattr(committed, "item_id", None)
            await until(conn, "response.created")  # turn detection's create_response
            transcript = await until(conn, "conversation.item.input_audio_transcription.completed")
            assert getattr(transcript, "transcript", "") == "What's the weather in Paris and Tokyo?"
            events = await response(conn)
            issued = calls(events)
            assert [c.arguments for c in issued] == ['{"city":"Paris"}', '{"city":"Tokyo"}']
            for call in issued:
                await answer(conn, call)
            await conn.response.create()
            reply = await response(conn)
            deltas = [e for e in reply if isinstance(e, ResponseAudioDeltaEvent)]
            assert deltas
            frame = base64.b64decode(deltas[0].delta)
            assert len(frame) == 2 * int(0.04 * RATE)  # 40 ms of PCM16 at 24 kHz
            kinds_seen = [e.type for e in reply]
            assert "response.output_audio_transcript.delta" in kinds_seen
            assert "response.output_audio.done" in kinds_seen
        assert kinds(emu) == []


async def test_barge_in_during_a_call_cancels_its_response_and_the_call() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.tool_call([("get_weather", {"city": "Oslo"})])
        turn = await conv.expect_turn()  # the user's interruption, after its silence
        assert turn.kind == "audio"
        await conv.say("Never mind then.")
        await conv.turn_complete()

    async with Emulator(scenario, protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await conn.conversation.item.create(
                item={
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "Weather in Oslo?"}],
                }
            )
            await conn.response.create()
            await until(conn, "response.output_item.done")
            await conn.input_audio_buffer.append(audio=audio(0.2, loud=True))
            await until(conn, "input_audio_buffer.speech_started")
            cut = await until(conn, "response.done")
            assert isinstance(cut, ResponseDoneEvent)
            assert cut.response.status == "cancelled"
            assert cut.response.status_details is not None
            assert cut.response.status_details.reason == "turn_detected"
            await conn.input_audio_buffer.append(audio=audio(0.6, loud=False))
            events = await response(conn)
            assert done(events).response.status == "completed"
            assert "Never mind then." in [getattr(e, "text", None) for e in events]
        assert kinds(emu) == []
        (record,) = emu.realtime_sessions[0].checker.calls.values()
        assert record.state == "cancelled"


async def test_scenario_interruption_sends_speech_started_and_ends_the_response_cancelled() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.say("Let me look")
        await conv.tool_call([("get_weather", {"city": "Oslo"})])
        await conv.interrupted()
        await conv.expect_turn()

    async with Emulator(scenario, protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await conn.response.create()
            events = await response(conn)
            assert "input_audio_buffer.speech_started" in [e.type for e in events]
            finished = done(events).response
            assert finished.status == "cancelled"
            assert [item.type for item in finished.output or []] == ["message", "function_call"]
        assert kinds(emu) == []


async def test_the_clients_cancel_and_truncate() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.say("A long story")
        await conv.speak(30.0)

    async with Emulator(scenario, protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn, output_modalities=["audio"])
            await conn.response.cancel()
            refused = await until(conn, "error")
            assert isinstance(refused, RealtimeErrorEvent)
            assert refused.error.code == "response_cancel_not_active"
            await conn.response.create()
            first = await until(conn, "response.output_audio.delta")
            assert isinstance(first, ResponseAudioDeltaEvent)
            await conn.response.cancel()
            cut = await until(conn, "response.done")
            assert isinstance(cut, ResponseDoneEvent)
            assert cut.response.status == "cancelled"
            assert cut.response.status_details is not None
            assert cut.response.status_details.reason == "client_cancelled"
            await conn.conversation.item.truncate(
                item_id=first.item_id, content_index=0, audio_end_ms=40
            )
            truncated = await until(conn, "conversation.item.truncated")
            assert getattr(truncated, "audio_end_ms", None) == 40
        assert kinds(emu) == []


async def test_manual_turns_commit_audio_and_wait_for_response_create() -> None:
    async with Emulator(protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn, audio={"input": {"turn_detection": None}})
            await conn.input_audio_buffer.commit()
            empty = await until(conn, "error")
            assert isinstance(empty, RealtimeErrorEvent)
            assert empty.error.code == "input_audio_buffer_commit_empty"
            await conn.input_audio_buffer.append(audio=audio(0.5, loud=True))
            await conn.input_audio_buffer.commit()
            committed = await until(conn, "input_audio_buffer.committed")
            added = await until(conn, "conversation.item.added")
            assert getattr(added, "item", None) is not None
            assert added.item.id == getattr(committed, "item_id", None)  # type: ignore[union-attr]
            await conn.response.create()
            events = await response(conn)
            assert len(calls(events)) == 2  # the rule model "heard" Paris and Tokyo
        session = emu.realtime_sessions[0]
        assert session.checker.pending()  # closed before answering
        assert [v.kind for v in emu.violations] == ["invalid_event", *["unanswered_call"] * 2]


async def test_a_response_ended_twice_at_once_sends_one_response_done() -> None:
    async def scenario(conv: Conversation) -> None:
        await conv.expect_turn()
        await conv.say("Hello")
        await asyncio.gather(conv.turn_complete(), conv.interrupted())
        await conv.expect_turn()

    async with Emulator(scenario, protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await conn.response.create()
            assert done(await response(conn)).response.status == "completed"
            await conn.session.update(session={"type": "realtime"})
            later = []
            while (event := await conn.recv()).type != "session.updated":
                later.append(event.type)
            assert "response.done" not in later
        assert kinds(emu) == []


async def test_g711_input_is_counted_at_8_khz_and_committed_by_hand() -> None:
    async with Emulator(protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn, audio={"input": {"format": {"type": "audio/pcmu"}}})
            await conn.input_audio_buffer.append(audio=base64.b64encode(b"\xff" * 400).decode())
            await conn.input_audio_buffer.commit()  # 50 ms: too short
            short = await until(conn, "error")
            assert isinstance(short, RealtimeErrorEvent)
            assert short.error.code == "input_audio_buffer_commit_empty"
            await conn.input_audio_buffer.append(audio=base64.b64encode(b"\xff" * 800).decode())
            await conn.input_audio_buffer.commit()  # 150 ms in all
            await until(conn, "input_audio_buffer.committed")
        assert kinds(emu) == [("invalid_event", "error")]
