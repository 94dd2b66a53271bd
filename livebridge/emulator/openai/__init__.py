"""The emulator's OpenAI Realtime (GA) side: events, the per-connection server and the contract
checker. ``Emulator(protocol="openai")`` serves it without the ``openai`` package; the client
that trusts it (``livebridge.emulator.openai.client``, ``Emulator.openai_client()``) needs it."""

from livebridge.emulator.openai.checker import REALTIME_SEVERITIES, RealtimeChecker
from livebridge.emulator.openai.connection import RealtimeSession

__all__ = [
    "REALTIME_SEVERITIES",
    "RealtimeChecker",
    "RealtimeSession",
]
