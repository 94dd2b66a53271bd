"""A Gemini Live server of our own, for tests, the demo and users' offline tests."""

from livebridge.emulator.checker import VIOLATION_KINDS, Answer, CallRecord, Violation
from livebridge.emulator.connection import EmulatedSession, Report, TranscriptEntry, UserTurn
from livebridge.emulator.faults import Faults
from livebridge.emulator.model import RuleModel
from livebridge.emulator.scenario import (
    Conversation,
    Scenario,
    ScenarioError,
    load_scenario,
    scenario_from_steps,
)
from livebridge.emulator.server import Emulator

__all__ = [
    "VIOLATION_KINDS",
    "Answer",
    "CallRecord",
    "Conversation",
    "EmulatedSession",
    "Emulator",
    "Faults",
    "Report",
    "RuleModel",
    "Scenario",
    "ScenarioError",
    "TranscriptEntry",
    "UserTurn",
    "Violation",
    "load_scenario",
    "scenario_from_steps",
]
