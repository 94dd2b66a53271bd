"""``livebridge demo --phone``: a whole phone call, offline — the bridge, the emulator and a
simulated caller over real sockets — printed as what the caller heard and when.

The call comes in as on Twilio: the caller posts to the voice webhook and streams to the URL
of the TwiML, each request signed (with ``TWILIO_AUTH_TOKEN`` when it is set, else a token made
up for the run) and the server checking every signature. The caller asks for the weather in two
cities (two parallel calls), hears the answer, says goodbye; the model says goodbye and calls
``end_call``, and the bridge hangs up only after the caller heard the goodbye (its mark came
back).
"""

from __future__ import annotations

import os
import secrets
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Literal, TextIO

import anyio

from livebridge.calls.observers import Observer
from livebridge.calls.tools import ToolRegistry
from livebridge.emulator import Conversation, Emulator
from livebridge.emulator.openai_live.session import LiveServerSession
from livebridge.emulator.speech import spoken
from livebridge.live.options import SessionOptions
from livebridge.phone.agent import AgentSource, session_opener
from livebridge.phone.bridge import (
    BargedIn,
    CallEnded,
    Listener,
    MarkHeard,
    ModelAnswered,
    PhoneBridge,
    PhoneEvent,
    PhoneOptions,
)
from livebridge.phone.caller import SimulatedCaller, ring, speech
from livebridge.phone.gate import STREAM_PATH, TELNYX_PATH
from livebridge.phone.server import serve_phone
from livebridge.phone.telnyx import TelnyxStream
from livebridge.phone.twilio import TwilioStream

GOODBYE = "Thanks, that's all. Goodbye!"


@dataclass(frozen=True, slots=True)
class PhoneScript:
    """The model's side of a phone call: the first utterance asks for the weather in
    ``places`` (one parallel call each), and is answered in ``reply_seconds`` of speech; any
    later one is a goodbye, ``goodbye_seconds`` long, then ``end_call``. What the caller says
    (``question``, ``goodbye``) is this script's: the model hears it, and nothing else."""

    places: tuple[str, ...] = ("Paris", "Tokyo")
    reply_seconds: float = 1.2
    goodbye_seconds: float = 0.6
    goodbye: str = GOODBYE

    @property
    def question(self) -> str:
        """What the caller asks: the weather in this script's ``places``."""
        *first, last = self.places
        named = f"{', '.join(first)} and {last}" if first else last
        return f"What's the weather in {named}?"

    async def __call__(self, conv: Conversation) -> None:
        turn = 0
        while True:
            await conv.expect_turn()
            turn += 1
            if turn == 1 or "end_call" not in conv.declarations:
                await self._weather(conv)
            else:
                await self._goodbye(conv)

    async def _weather(self, conv: Conversation) -> None:
        await conv.heard(self.question)
        ids = await conv.tool_call([("get_weather", {"city": place}) for place in self.places])
        answers = await conv.wait_answers(ids)
        if len(answers) < len(ids):
            return  # the caller hung up or barged in: the calls were cancelled
        said = "; ".join(
            f"{place}: {spoken(answers[i].response)}"
            for place, i in zip(self.places, ids, strict=True)
        )
        await conv.say(said + ".")
        await conv.speak(self.reply_seconds)
        await conv.turn_complete()

    async def _goodbye(self, conv: Conversation) -> None:
        await conv.heard(self.goodbye)
        await conv.say("Goodbye, and have a nice day!")
        await conv.speak(self.goodbye_seconds)
        (call,) = await conv.tool_call([("end_call", {})])
        await conv.wait_answers([call])
        await conv.turn_complete()


#: What the caller of the default script asks.
QUESTION = PhoneScript().question


@dataclass(frozen=True, slots=True)
class LivePhoneScript:
    """``PhoneScript`` on GPT-Live (``Emulator(LivePhoneScript(), model="gpt-live-1.1")``):
    the voice model hears each utterance of the caller; after the first it delegates, and the
    Responses backend calls ``get_weather`` for each of ``places`` in parallel; once answered
    and continued, the voice answers for ``reply_seconds``. A later utterance gets a
    ``goodbye_seconds`` goodbye, then the backend calls ``end_call``. Replies end as on the
    real service: in silence on the continuous track, with no event."""

    places: tuple[str, ...] = ("Paris", "Tokyo")
    reply_seconds: float = 1.2
    goodbye_seconds: float = 0.6

    async def __call__(self, live: LiveServerSession) -> None:
        heard = 0
        while True:
            await live.wait_until(partial(_heard_after, live, heard), timeout=_FOREVER)
            heard = live.utterances
            delegation = (live.session or {}).get("delegation") or {}
            tools = (delegation.get("responses") or {}).get("tools") or ()
            if heard == 1 or "end_call" not in {tool.get("name") for tool in tools}:
                creates = live.backend.creates
                await live.delegate([("get_weather", {"city": place}) for place in self.places])
                await live.wait_until(partial(_continued_after, live, creates), timeout=_FOREVER)
                await live.speak(self.reply_seconds)
            else:
                await live.speak(self.goodbye_seconds)
                await live.delegate([("end_call", {})])


_FOREVER = 24 * 3600.0  # a scenario waits as long as the call lasts


def _heard_after(live: LiveServerSession, utterances: int) -> bool:
    return live.utterances > utterances


def _continued_after(live: LiveServerSession, creates: int) -> bool:
    return live.backend.creates > creates


def phone_tools(delay: float = 0.3) -> ToolRegistry:
    """The demo call's tools: ``get_weather`` (``delay`` seconds) and ``end_call``."""
    tools = ToolRegistry()

    @tools.tool(timeout=10.0)
    async def get_weather(city: str) -> dict[str, object]:
        """The weather in a city."""
        await anyio.sleep(delay)
        return {"sky": "sunny" if city < "Q" else "cloudy", "celsius": 18 + len(city)}

    @tools.tool()
    async def end_call() -> dict[str, object]:
        """Hang up, once the caller heard what was said before."""
        return {"ended": True}

    return tools


@asynccontextmanager
async def phone_line(
    emulator: Emulator,
    tools: AgentSource,
    *,
    listeners: Sequence[Listener] = (),
    observers: Sequence[Observer] = (),
    options: SessionOptions | None = None,
    phone: PhoneOptions | None = None,
    auth_token: str | None = None,
    max_calls: int | None = None,
    provider: Literal["twilio", "telnyx"] = "twilio",
    telnyx_public_key: str | None = None,
) -> AsyncIterator[tuple[PhoneBridge, str]]:
    """A bridge to ``emulator`` (Gemini, or OpenAI or GPT-Live with μ-law both ways) served on a
    free port, answering with ``tools`` (a registry, an agent or an agent function): the bridge and
    its ``ws://`` URL (the webhook is at ``/twiml`` beside it). With ``auth_token`` every
    request must be signed with it. ``provider="telnyx"``: Telnyx's routes (``/texml``,
    ``/telnyx``), its webhooks checked with ``telnyx_public_key``."""
    openai = emulator.protocol == "openai"
    client = emulator.openai_client() if openai else emulator.client()
    model = emulator.live.model if emulator.live is not None else None
    opener = session_opener(tools, client, observers=observers, options=options, model=model)
    codec = TelnyxStream if provider == "telnyx" else TwilioStream
    bridge = PhoneBridge(opener, options=phone, listeners=listeners, codec=codec)
    async with serve_phone(
        bridge,
        auth_token=auth_token,
        max_calls=max_calls,
        provider=provider,
        telnyx_public_key=telnyx_public_key,
    ) as server:
        path = TELNYX_PATH if provider == "telnyx" else STREAM_PATH
        yield bridge, f"ws://127.0.0.1:{server.port}{path}"


async def run_phone_demo(out: TextIO | None = None) -> int:
    """Run the call; 0 when it ended with the goodbye heard, else 1."""
    began = time.monotonic()
    log = _CallLog(out or sys.stdout, began)
    listeners = (log.on_event,)
    script = PhoneScript()
    token = os.environ.get("TWILIO_AUTH_TOKEN") or secrets.token_urlsafe(24)
    async with (
        Emulator(script) as emu,
        phone_line(emu, phone_tools(), listeners=listeners, auth_token=token) as (_, url),
    ):
        webhook = url.removeprefix("ws://").removesuffix("/twilio")
        rung = await ring(f"http://{webhook}/twiml", auth_token=token)
        stream = rung.stream_url
        if rung.status != 200 or stream is None:
            log.line(f"the voice webhook answered {rung.status}: {rung.body.strip()}")
            return 1
        log.line(f"voice webhook (signed POST): stream to {stream}")
        log.line(f"dialing {url} (signed)")
        async with SimulatedCaller.dial(
            url, auth_token=token, signed_url=stream, parameters=rung.parameters
        ) as caller:
            for text in (script.question, script.goodbye):
                log.line(f"caller says: {text}")
                await caller.say(speech(text))
                await caller.wait_until(log.answered(caller), 30)
            await caller.wait_until(lambda: caller.closed_at is not None, 30)
        log.line(f"the stream closed (code {caller.close_code}); the caller heard:")
        for stretch in caller.heard:
            log.line(
                f"  {stretch.start - began:5.2f} s to {stretch.end - began:5.2f} s: "
                f"{stretch.seconds:.2f} s of the model's speech"
            )
    return 0 if log.ended == "hung_up" else 1


class _CallLog:
    """Prints the call's events with the time since it began."""

    def __init__(self, out: TextIO, began: float) -> None:
        self.out = out
        self.began = began
        self.ended: str | None = None

    def line(self, text: str) -> None:
        print(f"{time.monotonic() - self.began:6.2f} s  {text}", file=self.out, flush=True)

    def answered(self, caller: SimulatedCaller) -> Callable[[], bool]:
        """Until the next mark is echoed (the reply was heard) or the stream closed."""
        count = len(caller.echoed)
        return lambda: len(caller.echoed) > count or caller.closed_at is not None

    def on_event(self, event: PhoneEvent) -> None:
        match event:
            case ModelAnswered(latency=latency):
                self.line(f"model audio sent {latency * 1000:.0f} ms after the caller stopped")
            case MarkHeard(name=name, lag=lag):
                self.line(f"mark {name} echoed: heard ({lag * 1000:.0f} ms after it played)")
            case BargedIn(played=played):
                self.line(f"barge-in: clear sent, {played:.2f} s of the reply heard")
            case CallEnded(reason=reason):
                self.ended = reason
                self.line(f"call ended: {reason}")
            case _:
                pass
