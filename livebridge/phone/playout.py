"""What the caller has heard, without I/O: outbound 20 ms frames, marks, barge-in.

Twilio plays the audio it is sent in order, at real time, and echoes a ``mark`` once the audio
sent before it has played. ``Playout`` keeps a virtual play head (when the audio sent so far will
have played) that each echoed mark corrects, so at any moment it can say how much of the current
utterance the caller has heard: what a barge-in cuts (the position to truncate an OpenAI assistant
item at) and what a tool that acts after the goodbye waits for. Times are the caller's clock
(``now`` arguments, seconds); nothing here sleeps or sends.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass

from livebridge.phone.audio import PHONE_RATE, SILENCE

#: 20 ms of 8 kHz μ-law: the frame size Twilio itself sends.
FRAME_BYTES = 160
FRAME_SECONDS = FRAME_BYTES / PHONE_RATE
#: Marks awaiting their echo; past this the oldest is taken as heard (a peer that never echoes
#: must not grow memory without bound).
MAX_MARKS = 256


@dataclass(frozen=True, slots=True)
class Echo:
    """A mark came back: ``lag`` is how late it came after the audio should have played."""

    name: str
    utterance: int
    lag: float


@dataclass(frozen=True, slots=True)
class BargeIn:
    """The caller spoke over audio not yet played: send ``clear``.

    ``played`` is how much of utterance ``utterance`` the caller heard (seconds), ``unheard``
    how much was dropped; ``marks`` the marks the clear drops.
    """

    utterance: int
    played: float
    unheard: float
    marks: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Mark:
    name: str
    utterance: int
    plays_by: float  # when the audio before it should have played


class Playout:
    """The outbound side of one stream: frames to send, marks in flight, the play head."""

    __slots__ = (
        "_marks",
        "_names",
        "_partial",
        "_play_end",
        "_started",
        "_utterance_seconds",
        "frame_bytes",
        "utterance",
    )

    def __init__(self, frame_bytes: int = FRAME_BYTES) -> None:
        self.frame_bytes = frame_bytes
        self.utterance = 0  # the current (or last) model utterance, counted from 1
        self._partial = bytearray()
        self._play_end = 0.0
        self._started = False  # audio of the current utterance was sent
        self._utterance_seconds = 0.0  # sent of the current utterance
        self._marks: deque[_Mark] = deque()
        self._names = itertools.count(1)

    # -- sending -----------------------------------------------------------------------------

    def audio(self, ulaw: bytes, now: float) -> list[bytes]:
        """Whole frames of the model's audio to send now (a partial frame waits for more)."""
        if not self._started:
            self._started = True
            self.utterance += 1
            self._utterance_seconds = 0.0
        self._partial += ulaw
        whole = len(self._partial) - len(self._partial) % self.frame_bytes
        frames = [
            bytes(self._partial[i : i + self.frame_bytes])
            for i in range(0, whole, self.frame_bytes)
        ]
        del self._partial[:whole]
        self._played_out(len(frames), now)
        return frames

    def _played_out(self, count: int, now: float) -> None:
        seconds = count * self.frame_bytes / PHONE_RATE
        self._play_end = max(self._play_end, now) + seconds
        self._utterance_seconds += seconds

    def mark(self, now: float) -> tuple[list[bytes], str]:
        """Close the audio sent so far with a mark: the partial frame padded with silence,
        then the mark's name. Used after each utterance and before a tool that acts after it."""
        frames: list[bytes] = []
        if self._partial:
            frames.append(bytes(self._partial) + SILENCE * (self.frame_bytes - len(self._partial)))
            self._partial.clear()
            self._played_out(1, now)
        name = f"u{self.utterance}.{next(self._names)}"
        if len(self._marks) >= MAX_MARKS:
            self._marks.popleft()
        self._marks.append(_Mark(name, self.utterance, max(self._play_end, now)))
        return frames, name

    def end_utterance(self, now: float) -> tuple[list[bytes], str | None]:
        """The model's turn ended: the mark that says the caller heard it (None: no audio)."""
        if not self._started:
            return [], None
        self._started = False
        return self.mark(now)

    # -- what Twilio reports -----------------------------------------------------------------

    def echoed(self, name: str, now: float) -> Echo | None:
        """A mark came back; it and every mark before it are heard. None for a name not in
        flight (already cleared, or not ours)."""
        if not any(mark.name == name for mark in self._marks):
            return None
        while True:
            mark = self._marks.popleft()
            if mark.name == name:
                break
        if not self._marks:
            self._play_end = min(self._play_end, now)  # Twilio holds nothing more of ours
        return Echo(name, mark.utterance, max(0.0, now - mark.plays_by))

    def pending(self, name: str) -> bool:
        """The mark is in flight: the audio before it may not have been heard yet."""
        return any(mark.name == name for mark in self._marks)

    def unheard(self, now: float) -> float:
        """Seconds of sent audio the caller has not heard yet (by the play head)."""
        return max(0.0, self._play_end - now) + len(self._partial) / PHONE_RATE

    def played(self, now: float) -> float:
        """Seconds of the current utterance the caller has heard."""
        return max(0.0, self._utterance_seconds - max(0.0, self._play_end - now))

    def interrupt(self, now: float) -> BargeIn | None:
        """The model was interrupted: a ``BargeIn`` (send ``clear`` at once) when audio is
        still to play or an utterance is under way (Twilio may hold what the play head thinks
        played), None when the caller has heard everything of a finished utterance."""
        unheard = self.unheard(now)
        speaking = self._started
        marks = tuple(mark.name for mark in self._marks)
        played = self.played(now)
        self._partial.clear()
        self._marks.clear()
        self._play_end = min(self._play_end, now)
        self._started = False
        if unheard <= 0.0 and not marks and not speaking:
            return None
        return BargeIn(self.utterance, played, unheard, marks)
