"""The phone line as an ASGI app mounted under a prefix in a Starlette app, served by uvicorn:
signatures over the public URL with the mount point, a whole call through it, the host app's
own routes untouched."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
import pytest_asyncio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route
from websockets.exceptions import InvalidStatus

from livebridge.demo.phone import GOODBYE, QUESTION, PhoneScript, phone_tools
from livebridge.emulator import Emulator
from livebridge.phone import IncomingCall, PhoneAgent
from livebridge.phone.asgi import asgi_app
from livebridge.phone.bridge import CallEnded, PhoneEvent
from livebridge.phone.caller import SimulatedCaller, ring, speech
from livebridge.phone.server import serve_app
from tests.support.timing import seconds

pytestmark = pytest.mark.asyncio(loop_scope="module")

WAIT = seconds(20.0)
TOKEN = "a-token-for-the-mounted-line"
PUBLIC = "https://voice.example.com/phone"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def emulator() -> AsyncIterator[Emulator]:
    async with Emulator(PhoneScript(reply_seconds=0.6)) as emu:
        yield emu


async def health(request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


async def test_a_whole_call_through_the_app_mounted_under_a_prefix(emulator: Emulator) -> None:
    events: list[PhoneEvent] = []
    ended = anyio.Event()
    callers: list[IncomingCall] = []

    def listen(event: PhoneEvent) -> None:
        events.append(event)
        if isinstance(event, CallEnded):
            ended.set()

    def agent(call: IncomingCall) -> PhoneAgent:
        callers.append(call)
        return PhoneAgent(phone_tools(0.05), instructions="You tell the weather.")

    phone = asgi_app(
        agent,
        public_url=PUBLIC,
        auth_token=TOKEN,
        client=emulator.client(),
        listeners=[listen],
    )
    app = Starlette(routes=[Route("/health", health), Mount("/phone", app=phone)])
    sessions = len(emulator.sessions)
    async with serve_app(app) as server:
        local = f"127.0.0.1:{server.port}"
        webhook = f"http://{local}/phone/twiml"
        assert (await ring(webhook, auth_token=TOKEN)).status == 403  # signed without the prefix
        rung = await ring(webhook, auth_token=TOKEN, signed_url=f"{PUBLIC}/twiml")
        assert rung.status == 200, rung
        assert rung.stream_url == "wss://voice.example.com/phone/twilio"
        got = await ring(
            f"{webhook}?From=%2B15550100",
            auth_token=TOKEN,
            signed_url=f"{PUBLIC}/twiml?From=%2B15550100",
            method="GET",
        )
        assert (got.status, got.parameters) == (200, {"From": "+15550100"})
        stream = f"ws://{local}/phone/twilio"
        with pytest.raises(InvalidStatus) as refused:  # signed over the local URL
            async with SimulatedCaller.dial(stream, auth_token=TOKEN):
                pass
        assert refused.value.response.status_code == 403
        assert len(emulator.sessions) == sessions  # no Live session for it
        async with SimulatedCaller.dial(
            stream, auth_token=TOKEN, signed_url=rung.stream_url, parameters=rung.parameters
        ) as caller:
            await caller.say(speech(QUESTION))
            await caller.wait_until(lambda: bool(caller.echoed), WAIT)
            assert caller.heard_seconds >= 0.5  # the answer, after two parallel tool calls
            await caller.say(speech(GOODBYE))
            await caller.wait_until(lambda: caller.closed_at is not None, WAIT)
        with anyio.fail_after(WAIT):
            await ended.wait()
        assert await anyio.to_thread.run_sync(_get, f"http://{local}/health") == "ok"
    assert caller.close_code == 1000
    (end,) = [e for e in events if isinstance(e, CallEnded)]
    assert (end.reason, end.tool_calls) == ("hung_up", {"ok": 3})
    assert [c.from_number for c in callers] == ["+15550100"]
    assert len(emulator.sessions) == sessions + 1


async def test_without_a_public_url_the_mount_point_is_kept(emulator: Emulator) -> None:
    phone = asgi_app(phone_tools(), client=emulator.client())
    app = Starlette(routes=[Mount("/lines/support", app=phone)])
    async with serve_app(app) as server:
        rung = await ring(f"http://127.0.0.1:{server.port}/lines/support/twiml")
    assert rung.stream_url == f"wss://127.0.0.1:{server.port}/lines/support/twilio"


def _get(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as response:
        text: str = response.read().decode()
        return text
