"""The voice-agent example with ``--vendor openai``: the same page, tools and stats, offline.

The page's 16 kHz microphone audio reaches the emulator resampled to 24 kHz (the one rate
OpenAI Realtime takes) and ends the turn by the emulator's voice detection.
"""

from __future__ import annotations

import asyncio

import pytest

from .voice_client import BrowserClient, start_server


@pytest.mark.slow
async def test_a_spoken_turn_over_openai_realtime() -> None:
    server = start_server("--vendor", "openai")
    try:
        client = await BrowserClient.open(server.ws_url)
        await client.wait_for(lambda: bool(client.of_type("ready")))
        await client.speak_turn(timeout=60)
        stats = server.stats()
        await client.close()
    finally:
        final = await asyncio.to_thread(server.stop)
    settled = client.of_type("tool_settled")
    assert settled and {event["outcome"] for event in settled} <= {"ok", "error", "timeout"}
    assert client.audio, "no model audio reached the browser"
    assert stats["calls_settled"] == stats["calls_started"] == len(settled)
    assert final["violations"] == [] and final["session_errors"] == 0
