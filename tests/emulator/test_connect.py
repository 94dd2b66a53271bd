"""Every accepted path and credential form, with the SDK and with raw websockets."""

from __future__ import annotations

import ssl
import warnings

import pytest
from google.genai import errors, types
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from livebridge.emulator import Emulator
from tests.support.gemini_clients import MODEL, PATH, raw_connect, recv_json


@pytest.mark.parametrize("version", ["v1", "v1beta", "v1alpha"])
async def test_sdk_connects_on_every_version(live_emulator: Emulator, version: str) -> None:
    client = live_emulator.client(api_version=version)
    async with client.aio.live.connect(model=MODEL) as session:
        assert session.session_id == "s1"
    await live_emulator.wait_for(lambda: live_emulator.sessions[0].close_info is not None)
    emulated = live_emulator.sessions[0]
    assert emulated.api_version == version
    assert emulated.auth == "x-goog-api-key"
    assert emulated.path.startswith("/ws/")
    assert emulated.setup.model == f"models/{MODEL}"


async def test_sdk_default_base_url_with_trailing_slash_gives_double_slash(
    live_emulator: Emulator,
) -> None:
    client = live_emulator.client(base_url=live_emulator.base_url + "/")
    async with client.aio.live.connect(model=MODEL):
        pass
    assert live_emulator.sessions[0].path.startswith("//ws/")


async def test_sdk_ephemeral_token_uses_constrained_method(live_emulator: Emulator) -> None:
    client = live_emulator.client(api_version="v1alpha")
    client._api_client.api_key = "auth_tokens/abc"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", errors.ExperimentalWarning)
        async with client.aio.live.connect(model=MODEL):
            pass
    assert live_emulator.sessions[0].path.endswith("BidiGenerateContentConstrained")


@pytest.mark.parametrize(
    ("suffix", "headers", "auth"),
    [
        ("?key=abc", {}, "key"),
        ("?access_token=abc", {}, "access_token"),
        ("", {"Authorization": "Token auth_tokens/abc"}, "authorization"),
        ("", {"Authorization": "Bearer ya29.abc"}, "authorization"),
        ("", {"x-goog-api-key": "abc"}, "x-goog-api-key"),
    ],
)
async def test_raw_credential_forms(
    live_emulator: Emulator, suffix: str, headers: dict[str, str], auth: str
) -> None:
    path = "//" + PATH.format(version="v1alpha").lstrip("/") + "Constrained" + suffix
    async with raw_connect(live_emulator, path=path, headers=headers):
        pass
    assert live_emulator.sessions[0].auth == auth


async def test_missing_key_and_unknown_path_are_refused(live_emulator: Emulator) -> None:
    context = ssl.create_default_context(cafile=live_emulator.ca_file)
    base = f"wss://127.0.0.1:{live_emulator.port}"
    with pytest.raises(InvalidStatus) as missing:
        async with connect(base + PATH.format(version="v1beta"), ssl=context):
            pass
    assert missing.value.response.status_code == 401
    with pytest.raises(InvalidStatus) as unknown:
        async with connect(base + "/ws/other?key=x", ssl=context):
            pass
    assert unknown.value.response.status_code == 404
    assert live_emulator.sessions == []


async def test_server_frames_are_binary_camel_case(live_emulator: Emulator) -> None:
    async with raw_connect(live_emulator) as ws:
        await ws.send('{"realtime_input": {"text": "hello"}}')
        frame = await ws.recv(decode=False)
        assert isinstance(frame, bytes)
        assert b"outputTranscription" in frame
        message = await recv_json(ws)
        assert set(message) <= {"serverContent", "usageMetadata"}


async def test_env_points_sdk_at_emulator(
    live_emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in live_emulator.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    from google import genai

    client = genai.Client()
    async with client.aio.live.connect(
        model=MODEL, config=types.LiveConnectConfig(response_modalities=[types.Modality.TEXT])
    ) as session:
        await session.send_realtime_input(text="hi")
        texts = [m.text async for m in session.receive() if m.text]
    assert texts == ["You said: hi"]
