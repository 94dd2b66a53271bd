"""Telnyx calls end to end over real sockets, as the Twilio tests do: the simulated caller
speaking Telnyx's frames, the Ed25519-signed TeXML webhook, the stream token, the emulator."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator
from urllib.parse import parse_qs, urlsplit

import anyio
import msgspec
import pytest
import pytest_asyncio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from websockets.exceptions import InvalidStatus

from livebridge.demo.phone import GOODBYE, QUESTION, PhoneScript, phone_line, phone_tools
from livebridge.emulator import Emulator
from livebridge.phone.bridge import BargedIn, CallEnded, DtmfPressed, PhoneEvent
from livebridge.phone.caller import Rung, SimulatedCaller, ring, speech, tone
from livebridge.phone.telnyx import TelnyxStream
from livebridge.phone.twilio import MediaIn, StreamStarted
from tests.phone.test_phone_bridge import weather_in_parallel
from tests.support.timing import seconds

pytestmark = pytest.mark.asyncio(loop_scope="module")

WAIT = seconds(20.0)
KEY = Ed25519PrivateKey.generate()
PUBLIC = base64.b64encode(KEY.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def emulator() -> AsyncIterator[Emulator]:
    async with Emulator(PhoneScript(reply_seconds=1.5)) as emu:
        yield emu


def texml(url: str) -> str:
    return url.replace("ws://", "http://").replace("/telnyx", "/texml")


async def answer(
    url: str, key: Ed25519PrivateKey | None = KEY, timestamp: int | None = None
) -> Rung:
    form = {"CallSid": "v3:call-1", "From": "+15550100", "To": "+15550199"}
    return await ring(texml(url), form=form, telnyx_key=key, timestamp=timestamp)


def local(rung: Rung) -> str:
    assert rung.status == 200, rung
    assert rung.stream_url is not None and 'bidirectionalMode="rtp"' in rung.body
    return rung.stream_url.replace("wss://", "ws://")


async def test_a_telnyx_call_with_parallel_tool_calls_and_a_hang_up(emulator: Emulator) -> None:
    weather, running = weather_in_parallel()

    @weather.tool()
    async def end_call() -> dict[str, object]:
        """Hang up."""
        return {"ended": True}

    events: list[PhoneEvent] = []
    async with phone_line(
        emulator, weather, listeners=[events.append], provider="telnyx", telnyx_public_key=PUBLIC
    ) as (_, url):
        query = "?CallSid=v3%3Acall-1&From=%2B15550100"
        got = await ring(texml(url) + query, method="GET", telnyx_key=KEY)
        assert (got.status, got.parameters) == (200, {"From": "+15550100"})
        assert (await ring(texml(url) + query, method="GET")).status == 403
        stream = local(await answer(url))
        async with SimulatedCaller.dial(
            stream, provider="telnyx", call_sid="v3:call-1", stream_sid="stream-1"
        ) as caller:
            await caller.say(speech(QUESTION))
            await caller.wait_until(lambda: bool(caller.echoed), WAIT)
            assert caller.heard_seconds >= 1.0  # the answer, played from Telnyx media frames
            await caller.press("5")
            heard = caller.heard_seconds
            await caller.say(speech(GOODBYE))
            await caller.wait_until(lambda: caller.closed_at is not None, WAIT)
    assert sorted(running) == ["Paris", "Tokyo"]
    assert caller.close_code == 1000
    assert caller.heard_seconds - heard >= 0.5  # the goodbye played before the hang-up
    sent = [m for m in caller.received if m.get("event") in ("mark", "clear")]
    assert all(set(m) <= {"event", "mark"} for m in sent)  # Telnyx's outbound frames
    (end,) = [e for e in events if isinstance(e, CallEnded)]
    assert (end.reason, end.call_sid, end.tool_calls) == ("hung_up", "v3:call-1", {"ok": 3})
    (mark,) = end.marks
    assert mark in dict(caller.echoed)
    assert DtmfPressed("5") in events


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["gemini", "openai"])
async def vendor(request: pytest.FixtureRequest, emulator: Emulator) -> AsyncIterator[Emulator]:
    if request.param == "gemini":
        yield emulator
        return
    async with Emulator(PhoneScript(reply_seconds=1.5), protocol="openai") as emu:
        yield emu


async def test_a_telnyx_barge_in_clears_at_once(vendor: Emulator) -> None:
    events: list[PhoneEvent] = []
    async with phone_line(
        vendor,
        phone_tools(0.05),
        listeners=[events.append],
        provider="telnyx",
        telnyx_public_key=PUBLIC,
    ) as (_, url):
        stream = local(await answer(url))
        async with SimulatedCaller.dial(stream, provider="telnyx") as caller:
            await caller.say(speech(QUESTION))
            await caller.wait_until(lambda: caller.heard_seconds >= 0.3, WAIT)
            assert caller.heard_seconds < 1.0  # the model is still speaking
            spoke = caller.clock()
            await caller.say(tone(0.3))
            await caller.wait_until(lambda: bool(caller.cleared), WAIT)
            assert caller.cleared[0] - spoke < 0.2
            assert caller.buffered == 0.0
    (barge,) = [e for e in events if isinstance(e, BargedIn)]
    assert barge.played >= 0.3
    assert [e.reason for e in events if isinstance(e, CallEnded)] == ["caller_hung_up"]


async def test_telnyx_calls_past_the_cap_are_rejected_busy(emulator: Emulator) -> None:
    async with phone_line(
        emulator, phone_tools(), provider="telnyx", telnyx_public_key=PUBLIC, max_calls=1
    ) as (_, url):
        first = local(await answer(url))
        second = await answer(url)
        assert second.rejected and second.stream_url is None
        async with SimulatedCaller.dial(first, provider="telnyx") as caller:
            await caller.press("1")
            third = await answer(url)
            assert third.rejected


@pytest.mark.parametrize(
    "mistake", ["unsigned", "other key", "stale", "body changed", "no token", "forged token"]
)
async def test_what_telnyx_did_not_sign_opens_no_session(emulator: Emulator, mistake: str) -> None:
    sessions = len(emulator.sessions)
    events: list[PhoneEvent] = []
    async with phone_line(
        emulator,
        phone_tools(),
        listeners=[events.append],
        provider="telnyx",
        telnyx_public_key=PUBLIC,
    ) as (_, url):
        if mistake in ("no token", "forged token"):
            good = local(await answer(url))
            query = parse_qs(urlsplit(good).query)
            stream = (
                url
                if mistake == "no token"
                else (f"{url}?call={query['call'][0]}&expires={query['expires'][0]}&token=AAAA")
            )
            with pytest.raises(InvalidStatus) as refused:
                async with SimulatedCaller.dial(stream, provider="telnyx"):
                    pass
            assert refused.value.response.status_code == 403
        else:
            if mistake == "body changed":
                rung = await _forged_body(url)
            elif mistake == "unsigned":
                rung = await answer(url, None)
            elif mistake == "other key":
                rung = await answer(url, Ed25519PrivateKey.generate())
            else:
                rung = await answer(url, KEY, int(time.time()) - 600)
            assert rung.status == 403, rung
            assert "telnyx-signature-ed25519" in rung.body
    assert events == []
    assert len(emulator.sessions) == sessions


async def _forged_body(url: str) -> Rung:
    """A body signed for one caller, sent as another's."""
    import urllib.request

    stamp = str(int(time.time()))
    signed = base64.b64encode(KEY.sign(f"{stamp}|CallSid=a&From=%2B1".encode())).decode()
    request = urllib.request.Request(
        texml(url),
        data=b"CallSid=a&From=%2B2",
        method="POST",
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "telnyx-signature-ed25519": signed,
            "telnyx-timestamp": stamp,
        },
    )

    def fetch() -> Rung:
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return Rung(response.status, response.read().decode())
        except urllib.error.HTTPError as refused:
            with refused:
                return Rung(refused.code, refused.read().decode())

    return await anyio.to_thread.run_sync(fetch)


async def test_the_codec_reads_telnyx_frames() -> None:
    stream = TelnyxStream()
    start = {
        "event": "start",
        "sequence_number": "1",
        "stream_id": "s-1",
        "start": {
            "call_control_id": "v3:abc",
            "from": "+15550100",
            "to": "+15550199",
            "custom_parameters": {"lang": "fr"},
            "media_format": {"encoding": "PCMU", "sample_rate": 8000, "channels": 1},
        },
    }
    assert stream.receive(json.dumps({"event": "connected", "version": "1.0.0"})) is None
    started = stream.receive(json.dumps(start))
    assert started == StreamStarted(
        "s-1", "v3:abc", {"From": "+15550100", "To": "+15550199", "lang": "fr"}
    )
    payload = base64.b64encode(b"\xff" * 160).decode()

    def media(chunk: str, track: str = "inbound") -> str:
        body = {"track": track, "chunk": chunk, "timestamp": "20", "payload": payload}
        return json.dumps({"event": "media", "stream_id": "s-1", "media": body})

    assert stream.receive(media("2")) == MediaIn(b"\xff" * 160, 20)
    assert stream.receive(media("1")) is None and stream.last_skipped == "late_media"
    assert stream.receive(media("3", "outbound")) is None
    assert stream.last_skipped == "outbound_track"
    assert stream.receive('{"event": "error", "payload": {"code": 100003}}') is None
    assert stream.last_skipped == "provider_error"
    assert (
        stream.receive('{"event": "start", "start": {"media_format": {"sample_rate": "8k"}}}')
        is None
    )
    assert stream.last_skipped == "bad_start"
    assert json.loads(stream.clear()) == {"event": "clear"}
    assert json.loads(stream.mark("m1")) == {"event": "mark", "mark": {"name": "m1"}}
    assert stream.media(b"\x00") == '{"event":"media","media":{"payload":"AA=="}}'
    for ulaw in (b"", b"\xff" * 160, bytes(range(256))):  # the bytes a generic encoder gives
        generic = {"event": "media", "media": {"payload": base64.b64encode(ulaw).decode()}}
        assert stream.media(ulaw) == msgspec.json.encode(generic).decode()
