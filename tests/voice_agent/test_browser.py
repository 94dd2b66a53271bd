"""The page in headless Chromium with a fake microphone fed from a generated WAV file."""

from __future__ import annotations

import json
import wave
from pathlib import Path

import pytest
from playwright.async_api import async_playwright

from tests.system_packages import require

from .voice_client import ARTIFACTS, INPUT_RATE, start_server, tone


def fake_microphone(path: Path) -> Path:
    """1.5 s of a loud 220 Hz tone, then 1.5 s of silence; Chromium loops it."""
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(INPUT_RATE)
        wav.writeframes(tone(1.5) + tone(1.5, loud=False))
    return path


@pytest.mark.slow
async def test_page_talks_to_the_agent_in_chromium(tmp_path: Path) -> None:
    chromium = require("chromium", "chromium")
    microphone = fake_microphone(tmp_path / "microphone.wav")
    server = start_server()
    console: list[str] = []
    try:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(
                executable_path=chromium,
                args=[
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-quic",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--use-fake-ui-for-media-stream",
                    "--use-fake-device-for-media-stream",
                    f"--use-file-for-fake-audio-capture={microphone}",
                    "--autoplay-policy=no-user-gesture-required",
                ],
            )
            try:
                page = await browser.new_page(viewport={"width": 1200, "height": 820})
                page.on("console", lambda message: console.append(message.text))
                await page.goto(server.url)
                await page.click("#start")
                await page.wait_for_function(
                    """() => {
                        const s = window.voiceAgent.stats;
                        const first = window.voiceAgent.turns()[0];
                        return s.state === "live" && first && first.calls.length >= 6
                            && first.calls.every((call) => call.outcome !== null)
                            && s.chunksPlayed >= 5;
                    }""",
                    timeout=60_000,
                )
                stats = await page.evaluate("window.voiceAgent.stats")
                turns = await page.evaluate("window.voiceAgent.turns()")
                rows = await page.locator(".call.ok").count()
                transcript = await page.locator("#transcript").inner_text()
                ARTIFACTS.mkdir(exist_ok=True)
                await page.screenshot(path=str(ARTIFACTS / "voice_agent.png"), full_page=True)
            finally:
                await browser.close()
    finally:
        final = server.stop()

    first = turns[0]["calls"]
    assert {call["name"] for call in first} == {"get_weather", "get_time", "find_events"}
    assert {call["outcome"] for call in first} == {"ok"}, first
    assert rows >= 6
    assert stats["bytesSent"] > 0 and stats["chunksPlayed"] >= 5 and stats["errors"] == []
    assert "weather in Paris and Tokyo" in transcript
    assert final["audio_bytes_in"] > 0 and final["calls_started"] >= 6
    assert [v for v in final["violations"] if v["severity"] == "error"] == [], json.dumps(final)
    assert not [line for line in console if "error" in line.lower()], console
