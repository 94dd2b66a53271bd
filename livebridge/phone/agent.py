"""Who answers a call: a ``PhoneAgent`` (tools, model, instructions, voice) chosen per call.

An app gives the phone line a ``ToolRegistry`` (one agent for every call), a ``PhoneAgent``, or
a function ``agent(call)`` that receives the ``IncomingCall`` (its call sid, who called which
number, the stream's ``customParameters``) and returns the call's ``PhoneAgent``, so each
number or caller can have its own persona. ``session_opener`` turns that into the bridge's
``SessionOpener``: it writes the agent's instructions and voice into the vendor's session config
(Gemini ``systemInstruction`` and ``speechConfig``; OpenAI ``instructions`` and
``audio.output.voice``) and opens the ``LiveSession``. A GPT-Live model (``gpt-live-…`` on an
``openai.AsyncOpenAI``) gets ``GPT_LIVE_PHONE_CONFIG``: the call's μ-law both ways, natively.

The webhook passes the call's ``From`` and ``To`` to the stream as ``<Parameter>`` values
(``FROM_PARAMETER``, ``TO_PARAMETER``): Twilio's ``start`` message carries no phone numbers.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias

from livebridge.calls.observers import Observer
from livebridge.calls.policy import CallPolicy
from livebridge.calls.tools import ToolRegistry
from livebridge.errors import UsageError
from livebridge.live.options import SessionOptions
from livebridge.live.session import LiveSession
from livebridge.live.vendors import vendor_of
from livebridge.phone.bridge import OPENAI_PHONE_CONFIG, SessionOpener
from livebridge.phone.twilio import StreamStarted
from livebridge.profiles import bare_model_name

#: The ``<Parameter>`` names the webhook gives the stream: the caller's number and the one
#: called (Twilio's own form field names).
FROM_PARAMETER = "From"
TO_PARAMETER = "To"

GEMINI_MODEL = "gemini-3.8-live"
OPENAI_MODEL = "gpt-realtime-2"

#: A Gemini Live config for a call: spoken answers, with their transcription.
GEMINI_PHONE_CONFIG: dict[str, Any] = {
    "response_modalities": ["AUDIO"],
    "output_audio_transcription": {},
}

#: A GPT-Live session config for a call: the call's μ-law in and out as is (``audio/pcmu``
#: at 8 kHz, no resampling); the registry's tools are delegated to the Responses backend.
GPT_LIVE_PHONE_CONFIG: dict[str, Any] = {"audio": {"format": {"type": "audio/pcmu", "rate": 8000}}}


@dataclass(frozen=True, slots=True)
class IncomingCall:
    """A call whose stream started: what an agent function is told about it."""

    call_sid: str
    stream_sid: str
    from_number: str  # "" when the webhook did not say (a GET without ``From``)
    to_number: str
    parameters: dict[str, str] = field(default_factory=dict)  # the stream's customParameters

    @classmethod
    def of(cls, start: StreamStarted) -> IncomingCall:
        params = dict(start.custom_parameters)
        return cls(
            start.call_sid,
            start.stream_sid,
            params.get(FROM_PARAMETER, ""),
            params.get(TO_PARAMETER, ""),
            params,
        )


@dataclass(frozen=True, slots=True)
class PhoneAgent:
    """Who answers one call.

    ``model``: None is the vendor's default (``GEMINI_MODEL``, ``OPENAI_MODEL``).
    ``instructions``: the system instructions; ``voice``: the vendor's voice name. ``config``:
    the vendor's session config (a dict) in place of ``GEMINI_PHONE_CONFIG`` or
    ``OPENAI_PHONE_CONFIG``; ``instructions`` and ``voice`` are written over it.
    """

    tools: ToolRegistry
    model: str | None = None
    instructions: str | None = None
    voice: str | None = None
    config: Mapping[str, Any] | None = None
    policy: CallPolicy | None = None


#: What answers the calls: one registry, one agent, or a function choosing one per call.
AgentSource: TypeAlias = (
    ToolRegistry | PhoneAgent | Callable[[IncomingCall], PhoneAgent | Awaitable[PhoneAgent]]
)


def vendor_config(vendor: str, agent: PhoneAgent) -> dict[str, Any]:
    """The session config of ``agent`` on ``vendor``, its instructions and voice written in
    (a GPT-Live ``agent.model`` on ``"openai"``: ``GPT_LIVE_PHONE_CONFIG``)."""
    live = vendor == "openai" and bare_model_name(agent.model or "").startswith("gpt-live")
    base = (
        GEMINI_PHONE_CONFIG
        if vendor == "gemini"
        else GPT_LIVE_PHONE_CONFIG
        if live
        else OPENAI_PHONE_CONFIG
    )
    config = copy.deepcopy(dict(agent.config if agent.config is not None else base))
    if vendor == "gemini":
        if agent.instructions is not None:
            config["system_instruction"] = agent.instructions
        if agent.voice is not None:
            voice = {"prebuilt_voice_config": {"voice_name": agent.voice}}
            config["speech_config"] = {**(config.get("speech_config") or {}), "voice_config": voice}
        return config
    if agent.instructions is not None:
        config["instructions"] = agent.instructions
    if agent.voice is not None:
        audio = config.setdefault("audio", {})
        audio.setdefault("output", {})["voice"] = agent.voice
    return config


async def resolve(source: AgentSource, call: IncomingCall) -> PhoneAgent:
    """The agent of ``call``."""
    if isinstance(source, PhoneAgent):
        return source
    if isinstance(source, ToolRegistry):
        return PhoneAgent(source)
    agent = source(call)
    if inspect.isawaitable(agent):
        agent = await agent
    if not isinstance(agent, PhoneAgent):
        raise UsageError(f"the agent function returned {type(agent).__name__}, not a PhoneAgent")
    return agent


def session_opener(
    source: AgentSource,
    client: Any,
    *,
    observers: Sequence[Observer] = (),
    options: SessionOptions | None = None,
    model: str | None = None,
    instructions: str | None = None,
    voice: str | None = None,
    policy: CallPolicy | None = None,
) -> SessionOpener:
    """The bridge's ``SessionOpener``: each call's agent, its session on ``client``.

    ``model``, ``instructions``, ``voice`` and ``policy`` are used for an agent that sets none
    (the command's ``--model``, ``--instructions``, ``--voice`` and ``--policy``).
    """
    vendor = vendor_of(client)
    if vendor is None:
        raise UsageError(
            f"a phone agent needs a genai.Client or an openai.AsyncOpenAI, not "
            f"{type(client).__name__}"
        )
    default_model = GEMINI_MODEL if vendor == "gemini" else OPENAI_MODEL

    @asynccontextmanager
    async def open_session(start: StreamStarted) -> AsyncIterator[LiveSession]:
        agent = await resolve(source, IncomingCall.of(start))
        agent = replace(
            agent,
            model=agent.model or model or default_model,
            instructions=agent.instructions if agent.instructions is not None else instructions,
            voice=agent.voice or voice,
            policy=agent.policy or policy,
        )
        async with LiveSession.connect(
            client,
            model=agent.model or default_model,
            tools=agent.tools,
            config=vendor_config(vendor, agent),
            policy=agent.policy,
            observers=observers,
            options=options,
        ) as session:
            yield session

    return open_session
