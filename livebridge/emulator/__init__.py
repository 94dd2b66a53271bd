"""Live servers of our own (Gemini Live; OpenAI Realtime with ``protocol="openai"``; GPT-Live with a
``gpt-live`` model), for tests, the demo and users' offline tests: a public module.

``Emulator`` serves; a scenario (``Scenario``, ``scenario_from_steps``, ``load_scenario``) plays
the model through a ``Conversation`` (a ``LiveServerSession`` on GPT-Live), or the ``RuleModel``
does without one; ``Faults`` break the wire on purpose; the contract checker's findings are
``Violation``s, summed up in a ``Report``. A scenario runs on the emulator's own thread: it
meets the test through a ``Signal``, not an ``asyncio.Event``. Its sub-packages are internal.
"""

from livebridge.emulator.contract import Answer, CallRecord, Thresholds, Violation
from livebridge.emulator.faults import Faults
from livebridge.emulator.gemini.checker import SEVERITIES, VIOLATION_KINDS
from livebridge.emulator.model import RuleModel
from livebridge.emulator.openai.checker import REALTIME_SEVERITIES
from livebridge.emulator.openai_live.session import LiveOptions, LiveServerSession
from livebridge.emulator.scenario import Conversation, Scenario
from livebridge.emulator.server import Emulator
from livebridge.emulator.shared import (
    Report,
    Retention,
    ServiceOptions,
    TranscriptEntry,
    UserTurn,
)
from livebridge.emulator.signal import Signal
from livebridge.emulator.steps import load_scenario, scenario_from_steps

__all__ = [
    "REALTIME_SEVERITIES",
    "SEVERITIES",
    "VIOLATION_KINDS",
    "Answer",
    "CallRecord",
    "Conversation",
    "Emulator",
    "Faults",
    "LiveOptions",
    "LiveServerSession",
    "Report",
    "Retention",
    "RuleModel",
    "Scenario",
    "ServiceOptions",
    "Signal",
    "Thresholds",
    "TranscriptEntry",
    "UserTurn",
    "Violation",
    "load_scenario",
    "scenario_from_steps",
]
