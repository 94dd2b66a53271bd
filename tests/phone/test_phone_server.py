"""The phone server's door, over real sockets: Twilio's signatures on the webhook (POST and GET)
and on the stream's upgrade, the call cap, and requests that are not what Twilio sends."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
import pytest_asyncio
from websockets.exceptions import InvalidStatus

from livebridge.demo.phone import QUESTION, PhoneScript, phone_line, phone_tools
from livebridge.emulator import Emulator
from livebridge.phone.bridge import CallAnswered, CallEnded, PhoneEvent
from livebridge.phone.caller import Rung, SimulatedCaller, ring, speech
from livebridge.phone.gate import MAX_FORM, busy_twiml
from livebridge.phone.signature import HEADER, signature
from tests.support.timing import seconds

pytestmark = pytest.mark.asyncio(loop_scope="module")

WAIT = seconds(20.0)
TOKEN = "12345-not-a-real-token"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def emulator() -> AsyncIterator[Emulator]:
    async with Emulator(PhoneScript(reply_seconds=0.6)) as emu:
        yield emu


def webhook(url: str) -> str:
    return url.replace("ws://", "http://").replace("/twilio", "/twiml")


# -- the webhook --------------------------------------------------------------------------------


async def test_the_webhook_answers_a_signed_post_and_get(emulator: Emulator) -> None:
    async with phone_line(emulator, phone_tools(), auth_token=TOKEN) as (_, url):
        posted = await ring(webhook(url), auth_token=TOKEN)
        assert posted.status == 200
        assert posted.stream_url == url.replace("ws://", "wss://")
        query = webhook(url) + "?CallSid=CA1&From=%2B15550100"
        got = await ring(query, auth_token=TOKEN, method="GET")
        assert (got.status, got.stream_url) == (200, posted.stream_url)


@pytest.mark.parametrize(
    "mistake",
    ["unsigned", "other token", "http URL signed", "form changed", "GET unsigned", "query changed"],
)
async def test_the_webhook_refuses_what_twilio_did_not_sign(
    emulator: Emulator, mistake: str
) -> None:
    async with phone_line(emulator, phone_tools(), auth_token=TOKEN) as (_, url):
        hook = webhook(url)
        form = {"CallSid": "CA1", "From": "+15550100"}
        match mistake:
            case "unsigned":
                rung = await ring(hook)
            case "other token":
                rung = await ring(hook, auth_token=TOKEN + "x")
            case "http URL signed":
                rung = await ring(hook, auth_token=TOKEN, signed_url=hook)
            case "form changed":
                good = signature(TOKEN, hook.replace("http:", "https:"), form.items())
                forged = {**form, "From": "+15550666"}
                rung = await _post(hook, forged, {HEADER: good})
            case "GET unsigned":
                rung = await ring(hook, method="GET")
            case _:
                signed = hook.replace("http:", "https:") + "?CallSid=CA1"
                rung = await ring(hook + "?CallSid=CA2", auth_token=TOKEN, signed_url=signed)
        assert rung.status == 403
        assert HEADER in rung.body


async def _post(url: str, form: dict[str, str], headers: dict[str, str]) -> Rung:
    from urllib.parse import urlencode

    body = urlencode(form)
    return await _raw(
        url,
        (
            f"POST /twiml HTTP/1.1\r\nHost: {url.split('/')[2]}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
            + f"Content-Length: {len(body)}\r\n\r\n{body}"
        ).encode(),
    )


def _reply(raw: bytes) -> Rung:
    head, _, body = raw.partition(b"\r\n\r\n")
    return Rung(int(head.split(b" ")[1]) if head else 0, body.decode(errors="replace"))


async def _raw(url: str, request: bytes, chunk: int | None = None) -> Rung:
    """Send ``request`` (in pieces of ``chunk`` bytes) and read the reply to the end."""
    host, port = url.split("/")[2].split(":")
    async with await anyio.connect_tcp(host, int(port)) as stream:
        for i in range(0, len(request), chunk or len(request)):
            await stream.send(request[i : i + (chunk or len(request))])
        reply = b""
        with anyio.fail_after(WAIT):
            while True:
                try:
                    reply += await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    return _reply(reply)


async def test_a_post_is_read_however_it_arrives_and_refused_when_it_cannot_be(
    emulator: Emulator,
) -> None:
    async with phone_line(emulator, phone_tools()) as (_, url):
        hook = webhook(url)
        body = "CallSid=CA1&From=%2B15550100"
        form = "Content-Type: application/x-www-form-urlencoded\r\n"
        head = f"POST /twiml HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{form}"
        whole = f"{head}Content-Length: {len(body)}\r\n\r\n{body}".encode()
        byte_by_byte = await _raw(hook, whole, chunk=1)
        assert byte_by_byte.status == 200 and "<Connect><Stream" in byte_by_byte.body
        chunked = f"{head}Transfer-Encoding: chunked\r\n\r\n8\r\nCallSid=\r\n3\r\nCA1\r\n0\r\n\r\n"
        assert (await _raw(hook, chunked.encode())).status == 200
        big = "x" * (MAX_FORM + 1)
        bare = "Host: x\r\nConnection: close\r\n"
        cases = {
            f"{head}Content-Length: 999999999999\r\n\r\n": {413},
            f"{head}Transfer-Encoding: chunked\r\n\r\n{len(big):x}\r\n{big}\r\n0\r\n\r\n": {413},
            f"{head}Content-Length: 2\r\n\r\n\xff\xfe": {400},  # not UTF-8
            "POST /twiml\r\n\r\n": {400},
            f"POST /twiml HTTP/1.1\r\nX-Long: {'a' * 70_000}\r\n\r\n": {400, 431},
            "POST /twiml HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
            "Content-Length: 0\r\nConnection: close\r\n\r\n": {415},
            f"POST /twilio HTTP/1.1\r\n{bare}Content-Length: 0\r\n\r\n": {405},
            f"GET /twilio HTTP/1.1\r\n{bare}\r\n": {426},
            f"POST /elsewhere HTTP/1.1\r\n{bare}Content-Length: 0\r\n\r\n": {404},
            "PUT /twiml HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n": {405},
        }
        for request, statuses in cases.items():
            reply = await _raw(hook, request.encode("latin-1"))
            assert reply.status in statuses, (request[:60], reply.status, reply.body)


# -- the stream ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mistake", ["unsigned", "other token", "webhook URL signed"])
async def test_an_unsigned_stream_is_refused_before_any_live_session(
    emulator: Emulator, mistake: str
) -> None:
    sessions = len(emulator.sessions)
    events: list[PhoneEvent] = []
    async with phone_line(emulator, phone_tools(), auth_token=TOKEN, listeners=[events.append]) as (
        _,
        url,
    ):
        token = {"unsigned": None, "other token": "another"}.get(mistake, TOKEN)
        signed = (
            webhook(url).replace("http:", "https:") if mistake == "webhook URL signed" else None
        )
        with pytest.raises(InvalidStatus) as refused:
            async with SimulatedCaller.dial(url, auth_token=token, signed_url=signed):
                pass
        assert refused.value.response.status_code == 403
    assert events == []
    assert len(emulator.sessions) == sessions  # the emulator saw no connection


async def test_a_signed_call_goes_through_from_webhook_to_goodbye(emulator: Emulator) -> None:
    sessions = len(emulator.sessions)
    events: list[PhoneEvent] = []
    async with phone_line(
        emulator, phone_tools(0.05), auth_token=TOKEN, listeners=[events.append]
    ) as (_, url):
        rung = await ring(webhook(url), auth_token=TOKEN)
        assert rung.stream_url is not None
        async with SimulatedCaller.dial(url, auth_token=TOKEN, signed_url=rung.stream_url) as call:
            await call.say(speech(QUESTION))
            await call.wait_until(lambda: bool(call.echoed), WAIT)
    assert isinstance(events[0], CallAnswered)
    assert len(emulator.sessions) == sessions + 1


async def test_calls_past_the_cap_are_rejected_busy(emulator: Emulator) -> None:
    ended = anyio.Event()

    def listen(event: PhoneEvent) -> None:
        if isinstance(event, CallEnded):
            ended.set()

    async with phone_line(
        emulator, phone_tools(), auth_token=TOKEN, max_calls=1, listeners=[listen]
    ) as (_, url):
        first = await ring(webhook(url), auth_token=TOKEN)
        assert first.stream_url is not None and not first.rejected
        second = await ring(webhook(url), auth_token=TOKEN, call_sid="CA2")
        assert second.status == 200 and second.body == busy_twiml()
        assert second.rejected and second.stream_url is None
        async with SimulatedCaller.dial(url, auth_token=TOKEN) as caller:
            with pytest.raises(InvalidStatus) as refused:  # a stream no TwiML sent
                async with SimulatedCaller.dial(url, auth_token=TOKEN):
                    pass
            assert refused.value.response.status_code == 503
            await caller.press("1")
        with anyio.fail_after(WAIT):
            await ended.wait()
        third = await ring(webhook(url), auth_token=TOKEN, call_sid="CA3")
        assert third.stream_url is not None  # the first call's slot is free again
