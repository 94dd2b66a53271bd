"""The emulator's OpenAI Realtime (GA) side: events, the per-connection server, the contract
checker, and a client that trusts the emulator. ``Emulator(protocol="openai")`` serves it."""

from livebridge.emulator.openai.checker import REALTIME_SEVERITIES, RealtimeChecker
from livebridge.emulator.openai.client import EmulatorOpenAI, openai_client
from livebridge.emulator.openai.connection import RealtimeSession

__all__ = [
    "REALTIME_SEVERITIES",
    "EmulatorOpenAI",
    "RealtimeChecker",
    "RealtimeSession",
    "openai_client",
]
