"""The emulator's GPT-Live sideband (``/v1/live/sessions/{id}/attach``) to the unmodified
``openai`` SDK's ``client.live.sideband.connect()``: a replay then ``session.started``, every
server event mirrored, commands acting on the same session, ``session.start`` refused."""

from __future__ import annotations

import json

import pytest
from websockets.exceptions import InvalidStatus

from livebridge.emulator import Emulator, LiveServerSession
from tests.emulator.test_openai_live_verdicts import calls, output, raw, started, until
from tests.support.gpt_live_sessions import MODEL, live_client


async def test_an_attach_to_an_unknown_session_is_refused_before_the_upgrade() -> None:
    async with Emulator(None, model=MODEL) as emu:
        with pytest.raises(InvalidStatus) as refused:
            async with live_client(emu).live.sideband.connect(session_id="live_none"):
                pass
    assert refused.value.response.status_code == 404


async def test_the_sideband_gets_the_replay_and_its_commands_continue_the_session() -> None:
    async def scenario(live: LiveServerSession) -> None:
        await started(live)
        await live.delegate([("lookup", {"q": 1})])  # before the attach: in the replay
        await live.wait_until(lambda: bool(live.attached))
        await live.delegate([("lookup", {"q": 2})])  # after it: mirrored

    async with Emulator(scenario, model=MODEL) as emu, raw(emu) as primary:
        assert emu.live is not None
        live = emu.live.sessions[0]
        await emu.wait_for(lambda: len(live.open_calls) == 1)
        live_id = live.id
        manager = live_client(emu).live.sideband.connect(session_id=live_id)
        async with manager as sideband:
            replayed = await calls(sideband, 1)  # the replay, before session.started
            assert (await until(sideband, "session.started"))["session"]["id"] == live_id
            (mirrored,) = await calls(sideband, 1)
            assert replayed == [live.open_calls[0]]
            for call_id in (*replayed, mirrored):
                await sideband.send_raw(output(call_id))
            await sideband.send_raw(json.dumps({"type": "response.create", "event_id": "sb"}))
            # the primary sees the continuation the sideband's command started
            await until(primary, "response.event", nested="response.output_text.delta")
    assert live.backend.creates == 1 and live.backend.refusals == 0
    assert live.verdicts == []
    assert [e["type"] for e in live.sideband_received] == [
        "response.item.create",
        "response.item.create",
        "response.create",
    ]


async def test_session_start_on_the_sideband_is_refused_to_it_alone() -> None:
    async with Emulator(None, model=MODEL) as emu, raw(emu) as primary:
        assert emu.live is not None
        live = emu.live.sessions[0]
        async with live_client(emu).live.sideband.connect(session_id=live.id) as sideband:
            await until(sideband, "session.started")
            start = {"type": "session.start", "event_id": "s2", "session": {"model": MODEL}}
            await sideband.send_raw(json.dumps(start))
            error = await until(sideband, "error")
            # the primary's next answer is its own command's, not the sideband's error
            note = {"type": "session.thinking.append", "delegation_id": None, "content": "x"}
            await primary.send_raw(json.dumps(note))
            assert (await until(primary, "session.thinking.appended"))["type"] != "error"
    assert error["error"]["code"] == "invalid_value"
    assert error["client_event_id"] == "s2"
    supported = error["error"]["message"].split("Supported values are:")[1]
    assert "'session.start'" not in supported and "'response.create'" in supported
    assert live.session is not None and live.session["model"] == MODEL
