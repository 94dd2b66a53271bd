"""Bad input from one browser never affects another: the other completes its turn meanwhile.

Also the server's guards: cross-origin upgrades are refused, text frames are rate-limited.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator

import pytest
from websockets.exceptions import InvalidStatus

from .voice_client import BrowserClient, ServerProcess, start_server, tone

MAX_FRAME_BYTES = 32 * 1024
TEXT_BURST = 8
TEXT_RATE = 0.2  # per second: no token comes back while a test sends a few frames


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    process = start_server(
        "--max-frame-bytes",
        str(MAX_FRAME_BYTES),
        "--max-sessions",
        "4",
        "--text-burst",
        str(TEXT_BURST),
        "--text-rate",
        str(TEXT_RATE),
    )
    try:
        yield process
    finally:
        final = process.stop()
        assert final["violations"] == []
        assert final["calls_started"] == final["calls_settled"]


async def alongside_a_good_turn(
    server: ServerProcess, misbehave: Callable[[BrowserClient], Awaitable[None]]
) -> BrowserClient:
    """Run ``misbehave`` on one client while another speaks a whole turn; returns the bad one."""
    good = await BrowserClient.open(server.ws_url)
    bad = await BrowserClient.open(server.ws_url)
    await asyncio.gather(ready(good), ready(bad))
    await asyncio.gather(good.speak_turn(), misbehave(bad))
    settled = good.of_type("tool_settled")
    assert len(settled) >= 4 and {event["outcome"] for event in settled} == {"ok"}
    assert good.audio, "the good client heard the model speak"
    assert not good.of_type("error") and good.closed is None
    await good.close()
    return bad


async def test_text_where_audio_is_expected(server: ServerProcess) -> None:
    async def misbehave(client: BrowserClient) -> None:
        await client.ws.send("hello, can you hear me?")
        await client.wait_for(lambda: bool(client.of_type("error")))

    bad = await alongside_a_good_turn(server, misbehave)
    (error,) = bad.of_type("error")
    assert error["code"] == "bad_input" and "JSON" in error["message"]
    await bad.speak_turn()  # the connection is still usable
    assert bad.closed is None
    await bad.close()


async def test_garbage_json_and_odd_audio(server: ServerProcess) -> None:
    garbage = ['{"type": "dance"}', "[1, 2", '{"type": "text", "text": ""}', "null", '"audio"']

    async def misbehave(client: BrowserClient) -> None:
        for frame in garbage:
            await client.ws.send(frame)
        await client.ws.send(tone(0.04, loud=False)[:-1])  # odd length: not 16-bit PCM
        await client.wait_for(lambda: len(client.of_type("error")) == len(garbage) + 1)

    bad = await alongside_a_good_turn(server, misbehave)
    errors = bad.of_type("error")
    assert {e["code"] for e in errors} == {"bad_input"}
    assert "even number of bytes" in errors[-1]["message"]
    assert bad.closed is None
    await bad.close()


async def test_oversized_frame_closes_only_that_client(server: ServerProcess) -> None:
    async def misbehave(client: BrowserClient) -> None:
        await client.ws.send(tone(1.5))  # 48 000 bytes > 32 KiB
        await client.wait_for(lambda: client.closed is not None)

    bad = await alongside_a_good_turn(server, misbehave)
    assert bad.closed is not None and bad.closed[0] == 1009


async def test_flood_of_bad_frames_is_cut_off(server: ServerProcess) -> None:
    async def misbehave(client: BrowserClient) -> None:
        for _ in range(25):
            await client.ws.send("not json")
        await client.wait_for(lambda: client.closed is not None)

    bad = await alongside_a_good_turn(server, misbehave)
    assert bad.closed == (1008, "too many rejected messages")


async def test_deeply_nested_json_is_bad_input(server: ServerProcess) -> None:
    async def misbehave(client: BrowserClient) -> None:
        await client.ws.send("[" * 30_000)  # under the frame limit; nested past any parser's
        await client.wait_for(lambda: bool(client.of_type("error")))

    bad = await alongside_a_good_turn(server, misbehave)
    (error,) = bad.of_type("error")
    assert error["code"] == "bad_input" and "JSON" in error["message"]
    await bad.speak_turn()  # the handler survived: the same connection still talks
    assert bad.closed is None
    await bad.close()


async def test_text_frames_past_the_rate_limit_are_refused(server: ServerProcess) -> None:
    sent = TEXT_BURST + 4
    before = server.stats()["rate_limited_frames"]

    async def misbehave(client: BrowserClient) -> None:
        for _ in range(sent):
            await client.ws.send("{}")  # not a known message: each within the burst is bad_input
        await client.wait_for(lambda: len(client.of_type("error")) == sent)

    bad = await alongside_a_good_turn(server, misbehave)
    codes = [error["code"] for error in bad.of_type("error")]
    assert codes == ["bad_input"] * TEXT_BURST + ["rate_limited"] * 4
    assert "at most 8 at once, then 0.2 per second" in bad.of_type("error")[-1]["message"]
    assert server.stats()["rate_limited_frames"] - before == 4
    await bad.speak_turn()  # audio is not text: the connection carries on
    assert bad.closed is None
    await bad.close()


async def test_cross_origin_upgrade_is_refused(server: ServerProcess) -> None:
    before = server.stats()["origins_refused"]
    with pytest.raises(InvalidStatus) as refused:
        await BrowserClient.open(server.ws_url, origin="https://evil.example")
    response = refused.value.response
    assert response.status_code == 403
    assert b"--allow-origin" in response.body
    assert server.stats()["origins_refused"] == before + 1
    same = await BrowserClient.open(server.ws_url, origin=server.url.rstrip("/"))
    await ready(same)
    await same.close()


async def test_allowed_origins_are_accepted() -> None:
    server = start_server("--allow-origin", "https://app.example.com/")
    try:
        allowed = await BrowserClient.open(server.ws_url, origin="https://app.example.com")
        await ready(allowed)
        await allowed.close()
        for origin in ("https://app.example.com.evil.example", "null", "http://127.0.0.1:1"):
            with pytest.raises(InvalidStatus):
                await BrowserClient.open(server.ws_url, origin=origin)
    finally:
        final = await asyncio.to_thread(server.stop)
    assert final["origins_refused"] == 3 and final["sessions_total"] == 1


async def test_abrupt_disconnect_mid_turn(server: ServerProcess) -> None:
    async def misbehave(client: BrowserClient) -> None:
        await client.stream(tone(1.0) + tone(0.6, loud=False))
        await client.wait_for(lambda: bool(client.of_type("tool_started")))
        client.ws.transport.abort()  # no close frame, calls still running
        await client.wait_for(lambda: client.closed is not None)

    await alongside_a_good_turn(server, misbehave)
    stats = server.stats()
    assert stats["calls_started"] >= 12


async def test_excess_client_is_told_the_server_is_busy() -> None:
    server = start_server("--max-sessions", "2")
    try:
        first, second = BrowserClient.open(server.ws_url), BrowserClient.open(server.ws_url)
        clients = list(await asyncio.gather(first, second))
        await asyncio.gather(*(ready(client) for client in clients))
        extra = await BrowserClient.open(server.ws_url)
        await extra.wait_for(lambda: extra.closed is not None)
        (error,) = extra.of_type("error")
        assert error["code"] == "busy" and "try again" in error["message"]
        assert extra.closed == (1013, "server busy")
        await clients[0].close()
        await clients[1].speak_turn()  # the admitted clients carry on
        again = await BrowserClient.open(server.ws_url)
        await ready(again)
        for client in (clients[1], again):
            await client.close()
    finally:
        final = await asyncio.to_thread(server.stop)
    assert final["sessions_refused"] == 1 and final["sessions_total"] == 3


async def ready(client: BrowserClient) -> None:
    await client.wait_for(lambda: bool(client.of_type("ready")))
