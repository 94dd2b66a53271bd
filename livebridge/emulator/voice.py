"""The emulated service's ear and voice, without I/O: when user audio is speech, when an
utterance ends, and a tone that stands in for the model's speech."""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Literal

from livebridge.vendors.gemini import wire

_SPEECH_PEAK = 500
_DEFAULT_SILENCE_SECONDS = 0.5

#: What a chunk of user audio means: the user started talking over the model, or finished.
Heard = Literal["barge_in", "end_of_turn"]


def tone(seconds: float, rate: int) -> bytes:
    """A quiet 220 Hz PCM16 tone: something audible to stand in for speech."""
    count = int(seconds * rate)
    return struct.pack(
        f"<{count}h", *(int(3000 * math.sin(2 * math.pi * 220 * i / rate)) for i in range(count))
    )


def is_speech(pcm: bytes) -> bool:
    """Loud enough to be speech (a peak over a fixed level)."""
    samples = memoryview(pcm[: len(pcm) - len(pcm) % 2]).cast("h")
    return len(samples) > 0 and max(max(samples), -min(samples)) > _SPEECH_PEAK


@dataclass(slots=True)
class VoiceActivity:
    """Automatic activity detection: speech followed by enough silence is one utterance.

    Between ``activityStart`` and ``activityEnd`` (manual activity) silence ends nothing.
    """

    silence_seconds: float = _DEFAULT_SILENCE_SECONDS
    automatic: bool = True
    speech: float = 0.0
    silence: float = 0.0
    manual: bool = False

    @property
    def speaking(self) -> bool:
        """The user is in the middle of an utterance."""
        return self.speech > 0.0 or self.manual

    @classmethod
    def for_setup(cls, setup: wire.Setup) -> VoiceActivity:
        config = setup.realtime_input_config
        detection = config.automatic_activity_detection if config else None
        silence = _DEFAULT_SILENCE_SECONDS
        if detection and detection.silence_duration_ms:
            silence = detection.silence_duration_ms / 1000
        return cls(silence, automatic=not (detection and detection.disabled))

    def hear(self, pcm: bytes, seconds: float, *, model_talking: bool) -> Heard | None:
        if is_speech(pcm):
            started = self.speech == 0.0
            self.speech += seconds
            self.silence = 0.0
            return "barge_in" if started and model_talking else None
        if self.speech > 0.0 and not self.manual:
            self.silence += seconds
            if self.automatic and self.silence >= self.silence_seconds:
                return "end_of_turn"
        return None

    def end(self, *, force: bool) -> float | None:
        """The utterance is over; returns its seconds of speech (None: there was none)."""
        spoken = self.speech if self.speech > 0.0 or force else None
        self.speech = 0.0
        self.silence = 0.0
        return spoken
