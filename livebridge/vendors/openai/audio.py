"""The audio of one OpenAI Realtime conversation: the formats it takes and gives, and how much
of the model's speech the user heard.

Audio is PCM16 mono at 24 kHz both ways, the only ``audio/pcm`` rate the API takes, or G.711
μ-law at 8 kHz (``audio/pcmu``) in either direction. When the user interrupts, the latest
assistant audio is truncated to what was played, so the conversation holds only what was heard.
"""

from __future__ import annotations

from typing import Literal

from livebridge.protocol.encoding import b64decode
from livebridge.protocol.events import AudioOut
from livebridge.protocol.transport import Frames
from livebridge.vendors.openai import wire as openai_wire

#: ``audio/pcmu`` (G.711 μ-law): 8 kHz, a byte a sample.
G711_RATE = 8000


class Speech:
    """The audio formats of one conversation and the assistant item last heard speaking."""

    __slots__ = ("_g711_in", "_g711_out", "_speaking_item")

    def __init__(self, g711: tuple[bool, bool]) -> None:
        """``g711``: (input, output) configured as ``audio/pcmu`` rather than PCM."""
        self._g711_in, self._g711_out = g711
        self._speaking_item: str | None = None  # the assistant item of the latest audio

    @property
    def encoding(self) -> Literal["pcm16", "pcmu"]:
        """What ``send_audio`` takes: 16-bit PCM, or μ-law bytes for ``audio/pcmu``."""
        return "pcmu" if self._g711_in else "pcm16"

    def input_rate(self, rate: int | None) -> int:
        """24 kHz for ``audio/pcm``, 8 kHz for ``audio/pcmu``; any other rate is refused."""
        if self._g711_in:
            if rate is None or rate == G711_RATE:
                return G711_RATE
            raise ValueError(f"audio/pcmu is 8 kHz μ-law, not {rate} Hz")
        if rate is None or rate == openai_wire.INPUT_RATE:
            return openai_wire.INPUT_RATE
        raise ValueError(
            f"OpenAI Realtime takes 16-bit PCM at {openai_wire.INPUT_RATE} Hz only, not {rate} "
            "Hz: resample the audio to 24 kHz before send_audio"
        )

    def output(self, item_id: str | None, delta: str | None) -> AudioOut | None:
        """A ``response.output_audio.delta`` of ``item_id``, as the app's audio."""
        if item_id:
            self._speaking_item = item_id
        if not delta:
            return None
        if self._g711_out:
            return AudioOut(b64decode(delta), G711_RATE, "pcmu")
        return AudioOut(b64decode(delta), openai_wire.OUTPUT_RATE)

    def truncate(self, played: float) -> Frames | None:
        """``conversation.item.truncate`` of the latest assistant audio at ``played`` seconds."""
        if self._speaking_item is None:
            return None
        message = {
            "type": "conversation.item.truncate",
            "item_id": self._speaking_item,
            "content_index": 0,
            "audio_end_ms": max(0, round(played * 1000)),
        }
        self._speaking_item = None
        return Frames([message], "conversation.item.truncate")
