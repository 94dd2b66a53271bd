"""The voice agent as two worker processes sharing Redis: a browser that reconnects to the other
worker continues its conversation (the stored handle is resumed)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys

import pytest

from livebridge.store import RedisStore
from tests.support.redis_server import RedisServer
from tests.support.timing import seconds

from .voice_client import ROOT, SERVER, BrowserClient, start_server

_READY = re.compile(r"^(worker \d): Voice agent ready: open (http://\S+/)")


async def text_turn(client: BrowserClient, text: str) -> None:
    turns = len(client.of_type("turn_complete"))
    await client.ws.send(f'{{"type": "text", "text": "{text}"}}')
    await client.wait_for(
        lambda: len(client.of_type("turn_complete")) > turns and not client.open_calls, 60
    )


@pytest.mark.slow
async def test_a_browser_continues_its_conversation_on_another_worker(
    redis_server: RedisServer,
) -> None:
    command = [sys.executable, str(SERVER), "--emulator", "--workers", "2", "--port", "0"]
    command += ["--metrics-port", "0", "--redis", redis_server.url]
    process = await asyncio.create_subprocess_exec(
        *command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    output: list[str] = []
    urls: dict[str, str] = {}
    try:
        while len(urls) < 2:
            line = (await asyncio.wait_for(process.stdout.readline(), seconds(60))).decode()
            assert line, "the workers exited:\n" + "".join(output)
            output.append(line)
            if match := _READY.match(line):
                urls[match.group(1)] = match.group(2).replace("http://", "ws://") + "ws"
        assert urls["worker 1"] != urls["worker 2"]

        first = await BrowserClient.open(urls["worker 1"] + "?conversation=user-7")
        await first.wait_for(lambda: bool(first.of_type("ready")))
        assert first.of_type("ready")[0]["resumed"] is False
        await text_turn(first, "Weather in Paris?")
        await text_turn(first, "Thanks")  # a turn without calls: the service issues a handle
        store = RedisStore(redis_server.url)
        try:  # the handle follows turnComplete: wait until the worker stored it
            async with asyncio.timeout(seconds(30)):
                while (await store.load("user-7")).handle is None:  # noqa: ASYNC110 (Redis)
                    await asyncio.sleep(0.02)
        finally:
            await store.aclose()
        await first.close()

        second = await BrowserClient.open(urls["worker 2"] + "?conversation=user-7")
        await second.wait_for(lambda: bool(second.of_type("ready") or second.closed), seconds(60))
        assert len(second.of_type("ready")) == 1, second.events
        (ready,) = second.of_type("ready")
        assert ready["conversation"] == "user-7" and ready["resumed"] is True
        await text_turn(second, "And in Rome?")
        await second.close()
        assert not first.of_type("error") and not second.of_type("error")
        settled = first.of_type("tool_settled") + second.of_type("tool_settled")
        assert {event["outcome"] for event in settled} == {"ok"}
    finally:
        process.send_signal(signal.SIGINT)
        rest, _ = await asyncio.wait_for(process.communicate(), seconds(60))
        output.extend(rest.decode().splitlines(keepends=True))
    text = "".join(output)
    assert "emulator: PASS: no violations" in text, text
    assert text.count("Final stats") == 2


async def test_a_malformed_conversation_id_is_refused_in_one_line() -> None:
    server = start_server()
    try:
        client = await BrowserClient.open(server.ws_url + "?conversation=no%20spaces%21")
        await client.wait_for(lambda: client.closed is not None)
        (error,) = client.of_type("error")
        assert error["code"] == "bad_input"
        assert error["message"] == (
            "The conversation id must be 1 to 128 letters, digits or . _ : - characters."
        )
        assert client.closed == (1008, "bad conversation id")
        await client.close()
    finally:
        final = await asyncio.to_thread(server.stop)
    assert final["sessions_total"] == 0
