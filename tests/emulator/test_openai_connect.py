"""Opening an OpenAI Realtime session on the emulator: the handshake, the session, refusals."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
from openai.types.realtime import RealtimeErrorEvent, SessionCreatedEvent
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosedError, InvalidStatus

from livebridge.emulator import Emulator
from livebridge.emulator.openai import responses
from livebridge.errors import UsageError
from tests.support.gemini_clients import PATH as GEMINI_PATH
from tests.support.realtime_clients import MODEL, WEATHER_TOOL, configure, kinds, until


async def test_session_update_round_trip() -> None:
    async with Emulator(protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            created = await conn.recv()
            assert isinstance(created, SessionCreatedEvent)
            assert created.session.type == "realtime"
            assert created.session.model == MODEL
            audio_format = created.session.audio.input.format  # type: ignore[union-attr]
            assert (audio_format.type, audio_format.rate) == ("audio/pcm", 24000)  # type: ignore[union-attr]
            await conn.session.update(
                session={"type": "realtime", "output_modalities": ["text"], "tools": [WEATHER_TOOL]}
            )
            updated = await until(conn, "session.updated")
            session = updated.model_dump()["session"]
            assert session["output_modalities"] == ["text"]
            assert [tool["name"] for tool in session["tools"]] == ["get_weather"]
            assert session["audio"]["input"]["turn_detection"]["type"] == "server_vad"  # kept
        emulated = emu.realtime_sessions[0]
        assert list(emulated.declarations) == ["get_weather"]
        assert emulated.modality == "TEXT"
        assert emulated.path == f"/v1/realtime?model={MODEL}"
        assert emu.sessions == []
        assert kinds(emu) == []


async def test_an_update_without_session_type_is_refused_and_the_session_goes_on() -> None:
    async with Emulator(protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await until(conn, "session.created")
            await conn.send({"type": "session.update", "session": {"instructions": "beta"}})
            error = await until(conn, "error")
            assert isinstance(error, RealtimeErrorEvent)
            assert (error.error.code, error.error.param) == (
                "missing_required_parameter",
                "session.type",
            )
            await conn.session.update(session={"type": "realtime", "instructions": "GA"})
            assert (await until(conn, "session.updated")).session.instructions == "GA"  # type: ignore[union-attr]
        assert kinds(emu) == [("invalid_event", "error")]


async def test_the_beta_header_is_refused_like_the_service_does() -> None:
    async with Emulator(protocol="openai") as emu:
        beta = {"OpenAI-Beta": "realtime=v1"}
        async with emu.openai_client().realtime.connect(model=MODEL, extra_headers=beta) as conn:
            error = await conn.recv()
            assert isinstance(error, RealtimeErrorEvent)
            assert error.error.code == "beta_api_shape_disabled"
            assert "/v1/realtime" in error.error.message
            with pytest.raises(ConnectionClosedError) as closed:
                await conn.recv()
        assert closed.value.rcvd is not None
        assert closed.value.rcvd.code == 4000
        assert closed.value.rcvd.reason == "invalid_request_error.beta_api_shape_disabled"
        assert kinds(emu) == [("invalid_event", "error")]


async def test_a_model_not_served_is_refused() -> None:
    emulator = Emulator(protocol="openai", models=["gpt-realtime"])
    async with emulator as emu, emu.openai_client().realtime.connect(model="gpt-x") as conn:
        error = await conn.recv()
        assert isinstance(error, RealtimeErrorEvent)
        assert error.error.code == "model_not_found"
        with pytest.raises(ConnectionClosedError):
            await conn.recv()


async def handshake_refusal(emu: Emulator, path: str, headers: dict[str, str]) -> tuple[int, str]:
    context = ssl.create_default_context(cafile=emu.ca_file)
    uri = f"wss://127.0.0.1:{emu.port}{path}"
    with pytest.raises(InvalidStatus) as refused:
        async with connect(uri, ssl=context, additional_headers=headers):
            pass
    response = refused.value.response
    return response.status_code, response.body.decode() if response.body else ""


async def test_bad_handshakes_get_a_clear_http_error(
    openai_emulator: Emulator, gemini_emulator: Emulator
) -> None:
    key = {"Authorization": "Bearer test"}
    status, text = await handshake_refusal(openai_emulator, "/v1/realtime", key)
    assert (status, "'model'") == (400, text.split()[3])
    status, text = await handshake_refusal(openai_emulator, f"/v1/realtime?model={MODEL}", {})
    assert status == 401 and "Authorization: Bearer" in text
    status, text = await handshake_refusal(openai_emulator, "/v1/chat", key)
    assert status == 404 and "/v1/realtime" in text
    gemini_path = GEMINI_PATH.format(version="v1beta")
    status, text = await handshake_refusal(openai_emulator, gemini_path, {"x-goog-api-key": "k"})
    assert status == 404 and "speaks OpenAI Realtime" in text
    status, text = await handshake_refusal(gemini_emulator, f"/v1/realtime?model={MODEL}", key)
    assert status == 404 and "--protocol openai" in text


async def test_bad_client_events_get_error_events_and_the_session_goes_on() -> None:
    async with Emulator(protocol="openai") as emu:
        async with emu.openai_client().realtime.connect(model=MODEL) as conn:
            await configure(conn)
            await conn.send_raw("{not json")
            await conn.send_raw(json.dumps({"type": "response.explode"}))
            await conn.send_raw(json.dumps({"type": "input_audio_buffer.append", "audio": "%%"}))
            codes = []
            for _ in range(3):
                error = await until(conn, "error")
                assert isinstance(error, RealtimeErrorEvent)
                codes.append((error.error.code, error.error.param))
            assert codes == [
                ("invalid_json", None),
                ("invalid_value", "type"),
                ("invalid_value", "audio"),
            ]
            await conn.session.update(session={"type": "realtime"})
            await until(conn, "session.updated")
        assert kinds(emu) == [("invalid_event", "error")] * 3


async def test_each_protocol_has_its_own_client_and_environment(
    openai_emulator: Emulator, gemini_emulator: Emulator
) -> None:
    with pytest.raises(UsageError, match="protocol must be 'gemini' or 'openai'"):
        Emulator(protocol="grpc")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"use emu\.openai_client"):
        openai_emulator.client()
    assert openai_emulator.env() == {
        "OPENAI_BASE_URL": f"https://127.0.0.1:{openai_emulator.port}/v1",
        "OPENAI_API_KEY": "test",
        "SSL_CERT_FILE": openai_emulator.ca_file,
    }
    assert (
        str(openai_emulator.openai_client().base_url)
        == f"https://127.0.0.1:{openai_emulator.port}/v1/"
    )
    with pytest.raises(UsageError, match=r"use emu.client\(\)"):
        gemini_emulator.openai_client()


SHIPPED = Path(__file__).resolve().parents[1] / "data" / "demo_recording.jsonl"


async def test_the_fixture_and_a_copied_client_connect(live_openai_emulator: Emulator) -> None:
    client = live_openai_emulator.openai_client().with_options(timeout=5)
    async with client.realtime.connect(model=MODEL) as conn:
        await configure(conn)
    assert kinds(live_openai_emulator) == []
    with pytest.raises(UsageError, match="a Gemini Live session, not served on protocol 'openai'"):
        Emulator(protocol="openai", replay=SHIPPED)


async def test_past_max_items_the_oldest_item_is_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(responses, "MAX_ITEMS", 2)
    emulator = Emulator(protocol="openai")
    async with emulator as emu, emu.openai_client().realtime.connect(model=MODEL) as conn:
        await configure(conn)
        for name in ("first", "second", "third"):
            content = [{"type": "input_text", "text": name}]
            await conn.conversation.item.create(
                item={"id": name, "type": "message", "role": "user", "content": content}
            )
            await until(conn, "conversation.item.done")
        await conn.conversation.item.retrieve(item_id="second")
        retrieved = await until(conn, "conversation.item.retrieved")
        assert retrieved.model_dump()["item"]["id"] == "second"
        await conn.conversation.item.retrieve(item_id="first")
        error = await until(conn, "error")
        assert isinstance(error, RealtimeErrorEvent)
        assert error.error.code == "item_not_found"


#: Serves OpenAI Realtime with the ``openai`` package unimportable (it is not a dependency).
WITHOUT_OPENAI = """
import asyncio, json, ssl, sys
sys.modules["openai"] = None  # import openai now raises ImportError
from websockets.asyncio.client import connect
from livebridge.emulator import Emulator
from livebridge.errors import UsageError

async def main():
    async with Emulator(protocol="openai") as emu:
        context = ssl.create_default_context(cafile=emu.ca_file)
        uri = f"wss://127.0.0.1:{emu.port}/v1/realtime?model=gpt-realtime"
        key = {"Authorization": "Bearer k"}
        async with connect(uri, ssl=context, additional_headers=key) as ws:
            print(json.loads(await ws.recv())["type"])
        try:
            emu.openai_client()
        except UsageError as error:
            print(error)

asyncio.run(main())
"""


def test_the_emulator_serves_openai_without_the_openai_package() -> None:
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_OPENAI], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    created, refused = result.stdout.splitlines()
    assert created == "session.created"
    assert refused.startswith("Emulator.openai_client needs the openai package")
    assert refused.endswith(": pip install openai")
