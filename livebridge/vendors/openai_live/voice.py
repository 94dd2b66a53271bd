"""Where the voice model's replies begin and end on GPT-Live's continuous output track.

GPT-Live sends output audio for the whole session, digitally silent between replies, and no
event marks the end of a reply. ``VoiceTrack`` reads the track: silence while the model is
quiet is not delivered (it is no reply, and a phone would hear it as the model answering);
the first sound starts a reply; ``QUIET_SECONDS`` of silence after it end the reply, as
peers do on the model's clock. Sans-I/O: it sees the bytes and their format only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

#: Seconds of silence (on the track's own clock) that end a reply.
QUIET_SECONDS: Final = 0.5

#: What one chunk of the track means: ``drop`` (silence between replies), ``play`` (part of a
#: reply), ``begin`` (the first sound of a reply), ``end`` (the silence that closes one).
Heard = Literal["drop", "play", "begin", "end"]

_ULAW_ZERO = b"\xff\x7f"  # μ-law's two codes for a zero sample


def is_silent(audio: bytes, *, g711: bool) -> bool:
    """Digital silence: every sample zero."""
    if g711:
        return not audio.translate(None, _ULAW_ZERO)
    return not audio.translate(None, b"\x00")


@dataclass(slots=True)
class VoiceTrack:
    """The state of the output track: inside a reply or between replies."""

    g711: bool = False
    quiet_seconds: float = QUIET_SECONDS
    speaking: bool = False
    quiet: float = 0.0  # seconds of silence since the last sound of this reply

    def hear(self, audio: bytes) -> Heard:
        """What ``audio``, the next chunk of the track, is."""
        if not is_silent(audio, g711=self.g711):
            begun = not self.speaking
            self.speaking, self.quiet = True, 0.0
            return "begin" if begun else "play"
        if not self.speaking:
            return "drop"
        self.quiet += len(audio) / 8000 if self.g711 else len(audio) / 48_000
        if self.quiet >= self.quiet_seconds:
            self.speaking, self.quiet = False, 0.0
            return "end"
        return "play"
