"""Every client message the SDK can send is understood (no violation, no close)."""

from __future__ import annotations

import warnings

from google.genai import types

from livebridge.emulator import Conversation, Emulator
from tests.support.gemini_clients import MODEL, weather_config


async def listen(conv: Conversation) -> None:
    """A model that only listens."""


async def test_every_sdk_send_method_is_understood() -> None:
    config = weather_config(
        modality="AUDIO",
        system_instruction="You are helpful.",
        speech_config=types.SpeechConfig(
            voice_config=types.VoiceConfig(
                prebuilt_voice_config=types.PrebuiltVoiceConfig(voice_name="Kore")
            )
        ),
        session_resumption=types.SessionResumptionConfig(),
        input_audio_transcription=types.AudioTranscriptionConfig(),
        output_audio_transcription=types.AudioTranscriptionConfig(),
        realtime_input_config=types.RealtimeInputConfig(
            automatic_activity_detection=types.AutomaticActivityDetection(disabled=True),
            activity_handling=types.ActivityHandling.START_OF_ACTIVITY_INTERRUPTS,
        ),
        context_window_compression=types.ContextWindowCompressionConfig(
            trigger_tokens=25600, sliding_window=types.SlidingWindow(target_tokens=12800)
        ),
    )
    audio = types.Blob(data=b"\x00\x01" * 320, mime_type="audio/pcm;rate=16000")
    async with (
        Emulator(listen) as live_emulator,
        live_emulator.client().aio.live.connect(model=MODEL, config=config) as session,
    ):
        await session.send_client_content(
            turns=types.Content(role="user", parts=[types.Part(text="hi")]), turn_complete=False
        )
        await session.send_realtime_input(activity_start=types.ActivityStart())
        await session.send_realtime_input(audio=audio)
        await session.send_realtime_input(
            video=types.Blob(data=b"\xff\xd8", mime_type="image/jpeg")
        )
        await session.send_realtime_input(activity_end=types.ActivityEnd())
        await session.send_realtime_input(audio_stream_end=True)
        await session.send_realtime_input(text="typed")
        await session.send_context_update(system_instruction="new instructions", tools=[])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            await session.send(input="legacy", end_of_turn=True)
        await live_emulator.wait_for(
            lambda: sum(e.direction == "client" for e in live_emulator.transcript) >= 10
        )
        emulated = live_emulator.sessions[0]
        assert emulated.close_info is None
        assert emulated.declarations == {}
        assert not emulated.voice.automatic
    client_messages = [e.message for e in live_emulator.transcript if e.direction == "client"]
    assert [next(iter(m)) for m in client_messages[:10]] == [
        "setup",
        "clientContent",
        "realtimeInput",
        "realtimeInput",
        "realtimeInput",
        "realtimeInput",
        "realtimeInput",
        "realtimeInput",
        "contextUpdate",
        "clientContent",
    ]
    video = client_messages[4]["realtimeInput"]["video"]
    assert video["mimeType"] == "image/jpeg" and video["data"] == "_9g="
    assert live_emulator.violations == []
