"""The page in headless Chromium with a fake microphone fed from a generated WAV file.

The page is driven as a person would: Start, speak (the looped WAV file), Stop while a call is
still running. The timeline must then end in the same outcomes the server counted in /stats.
"""

from __future__ import annotations

import json
import wave
from collections import Counter
from pathlib import Path

import pytest
from playwright.async_api import async_playwright

from tests.support.system_packages import require

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
    failed_requests: list[str] = []
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
                page.on(
                    "response",
                    lambda response: failed_requests.extend(
                        [f"{response.status} {response.url}"] if response.status >= 400 else []
                    ),
                )
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
                rows = await page.locator(".call.ok").count()
                # Stop while a call of a later turn is still running.
                await page.wait_for_function(
                    """() => window.voiceAgent.turns().slice(1)
                        .some((turn) => turn.calls.some((call) => call.outcome === null))""",
                    timeout=60_000,
                )
                await page.click("#stop")
                await page.wait_for_function(
                    "() => window.voiceAgent.stats.state === 'stopped'", timeout=30_000
                )
                stats = await page.evaluate("window.voiceAgent.stats")
                turns = await page.evaluate("window.voiceAgent.turns()")
                labels = await page.locator(".turn h3").all_inner_texts()
                transcript = await page.locator("#transcript").inner_text()
                status = await page.locator("#status").inner_text()
                badge = await page.locator("#backend").inner_text()
                outcomes = await page.locator(".call .outcome").all_inner_texts()
                arguments = await page.locator(".call .name small").all_inner_texts()
                server_stats = server.stats()
                ARTIFACTS.mkdir(exist_ok=True)
                await page.screenshot(path=str(ARTIFACTS / "voice_agent.png"), full_page=True)
            finally:
                await browser.close()
    finally:
        final = server.stop()

    # After Stop, every call shows its final outcome, and they are the server's.
    shown = Counter(call["outcome"] for turn in turns for call in turn["calls"])
    assert None not in shown, turns
    assert shown == Counter(server_stats["outcomes"]), (shown, server_stats)
    assert stats["callsStarted"] == server_stats["calls_started"] == stats["callsSettled"]
    assert status == "Stopped" and stats["errors"] == []
    # Offline, the page says so; each call shows its outcome in words and its whole arguments.
    assert badge == "emulator"
    assert all(text.split(" · ")[0] in shown for text in outcomes), outcomes
    assert any(text.startswith("ok · ") and text.endswith(" ms") for text in outcomes), outcomes
    assert all(text.startswith("(") and ")" in text for text in arguments if text), arguments
    # Turns are numbered as shown (newest first), without gaps.
    assert labels == [f"Turn {n}" for n in range(len(labels), 0, -1)] and len(labels) >= 2
    assert "{" not in transcript and '"' not in transcript  # words, not JSON
    assert failed_requests == []  # the favicon included

    first = turns[0]["calls"]
    assert {call["name"] for call in first} == {"get_weather", "get_time", "find_events"}
    assert {call["outcome"] for call in first} == {"ok"}, first
    assert rows >= 6
    assert stats["bytesSent"] > 0 and stats["chunksPlayed"] >= 5 and stats["errors"] == []
    assert "weather in Paris and Tokyo" in transcript
    assert final["audio_bytes_in"] > 0 and final["calls_started"] >= 6
    assert [v for v in final["violations"] if v["severity"] == "error"] == [], json.dumps(final)
    assert not [line for line in console if "error" in line.lower()], console
