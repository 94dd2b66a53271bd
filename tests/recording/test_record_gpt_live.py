"""Recording a GPT-Live session: its wire as it passed (the unmodified openai SDK against the
emulator over TLS), audio reduced to its length, calls and answers through the redaction hook
(its replay: ``test_replay_gpt_live``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import livebridge
from livebridge import LiveSession, SessionOptions
from livebridge.emulator import Emulator, LiveServerSession
from livebridge.observe.trace import TraceObserver
from livebridge.protocol.events import TurnComplete
from livebridge.recording.read import read_recording
from tests.support.gemini_sessions import collect_until
from tests.support.gpt_live_sessions import MODEL


def hide_card(function: str, value: dict[str, Any]) -> dict[str, Any]:
    return {key: ("<hidden>" if key == "card" else item) for key, item in value.items()}


async def record(path: Path) -> None:
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def pay(card: str, amount: int) -> dict[str, Any]:
        """Pay with a card."""
        return {"paid": amount, "card": card}

    @tools.tool
    async def balance(user: str) -> dict[str, Any]:
        """A user's balance."""
        return {"user": user, "eur": 12}

    async def scenario(live: LiveServerSession) -> None:
        await live.wait_until(lambda: live.audio_ms > 0)
        await live.delegate([("pay", {"card": "4111", "amount": 5}), ("balance", {"user": "ada"})])

    options = SessionOptions(record=str(path))
    async with (
        Emulator(scenario, model=MODEL) as emu,
        LiveSession.connect(
            emu.client(),
            model=MODEL,
            tools=tools,
            observers=[TraceObserver(redact=hide_card)],
            options=options,
        ) as session,
    ):
        await session.send_audio(bytes(4800))
        await collect_until(session, lambda e: isinstance(e, TurnComplete))


async def test_a_gpt_live_session_records_its_wire(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    await record(path)
    header = json.loads(path.read_text().splitlines()[0])
    assert header == {"livebridge_recording": 2, "audio": "length", "vendor": "gpt-live"}
    recording = read_recording(path)
    assert recording.vendor == "gpt-live"
    entries = [(e.ev, e.data.get("msg") or {}) for e in recording.entries]
    assert entries[0][0] == "open" and entries[-1][0] == "close"
    sent = [m for ev, m in entries if ev == "send"]
    received = [m for ev, m in entries if ev == "recv"]
    (audio,) = [m for m in sent if m["type"] == "session.input_audio.append"]
    assert audio == {"type": "session.input_audio.append", "audioBytes": 4800}
    calls = {
        m["event"]["item"]["name"]: json.loads(m["event"]["item"]["arguments"])
        for m in received
        if m["type"] == "response.event" and m["event"]["type"] == "response.output_item.done"
        if m["event"]["item"]["type"] == "function_call"
    }
    assert calls == {"pay": {"card": "<hidden>", "amount": 5}, "balance": {"user": "ada"}}
    answers = [
        json.loads(m["item"]["output"])["output"]
        for m in sent
        if m["type"] == "response.item.create"
    ]
    assert sorted(answers, key=str) == sorted(
        [{"paid": 5, "card": "<hidden>"}, {"user": "ada", "eur": 12}], key=str
    )
    assert [m["type"] for m in sent].count("response.create") == 1
    assert "4111" not in path.read_text()
