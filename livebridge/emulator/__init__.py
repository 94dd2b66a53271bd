"""Live servers of our own (Gemini Live; OpenAI Realtime with ``protocol="openai"``), for tests,
the demo and users' offline tests."""

from livebridge.emulator.contract import Answer, CallRecord, Thresholds, Violation
from livebridge.emulator.faults import Faults
from livebridge.emulator.gemini.checker import SEVERITIES, VIOLATION_KINDS
from livebridge.emulator.gemini.connection import EmulatedSession
from livebridge.emulator.model import RuleModel
from livebridge.emulator.openai import REALTIME_SEVERITIES, RealtimeSession
from livebridge.emulator.scenario import Conversation, Scenario
from livebridge.emulator.server import Emulator
from livebridge.emulator.shared import (
    Report,
    Retention,
    ServiceOptions,
    TranscriptEntry,
    UserTurn,
)
from livebridge.emulator.steps import load_scenario, scenario_from_steps

__all__ = [
    "REALTIME_SEVERITIES",
    "SEVERITIES",
    "VIOLATION_KINDS",
    "Answer",
    "CallRecord",
    "Conversation",
    "EmulatedSession",
    "Emulator",
    "Faults",
    "RealtimeSession",
    "Report",
    "Retention",
    "RuleModel",
    "Scenario",
    "ServiceOptions",
    "Thresholds",
    "TranscriptEntry",
    "UserTurn",
    "Violation",
    "load_scenario",
    "scenario_from_steps",
]
