"""Telephone audio: G.711 μ-law at 8 kHz ↔ 16-bit PCM at the vendor's rate.

The codec is the standard library's ``audioop`` (``audioop-lts`` on Python 3.13 and later, where
the stdlib module is gone); resampling is ``soxr``, streamed so chunk borders add no clicks and
the filter's state carries from one 20 ms frame to the next.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import numpy as np
import soxr

if sys.version_info >= (3, 13):  # pragma: no cover - the audioop-lts package
    import audioop
else:
    with warnings.catch_warnings():  # deprecated in 3.11-3.12, which still ship it
        warnings.simplefilter("ignore", DeprecationWarning)
        import audioop

#: Twilio Media Streams' one rate: 8 kHz mono μ-law, a byte a sample.
PHONE_RATE = 8000
#: μ-law's encoding of a zero sample.
SILENCE = b"\xff"
#: The RMS above which a chunk of PCM16 counts as speech (the caller's end of speech, for the
#: latency a caller feels); well above line noise, well below speech at a normal level.
_SPEECH_RMS = 300


def ulaw_to_pcm16(ulaw: bytes) -> bytes:
    """G.711 μ-law bytes → 16-bit little-endian PCM, sample for sample."""
    return audioop.ulaw2lin(ulaw, 2)


def pcm16_to_ulaw(pcm: bytes | memoryview) -> bytes:
    """16-bit little-endian PCM → G.711 μ-law, a byte a sample; any buffer, so the resampler's
    output is read where it lies."""
    return audioop.lin2ulaw(pcm, 2)


def is_speech(pcm: bytes) -> bool:
    """Loud enough to be speech: an RMS over a fixed level."""
    return len(pcm) >= 2 and audioop.rms(pcm, 2) > _SPEECH_RMS


#: soxr returns int16 in the host's order: on a little-endian host it is the wire's already.
_LITTLE = sys.byteorder == "little"


def _pcm16(samples: np.ndarray[Any, Any]) -> memoryview:
    """The bytes of ``soxr``'s int16 output, in place (swapped only on a big-endian host)."""
    return (samples if _LITTLE else samples.astype("<i2")).data.cast("B")


class Resampler:
    """One direction of a stream's audio from ``source`` Hz to ``target`` Hz (16-bit mono).

    Keeps ``soxr``'s filter state between chunks; ``flush()`` returns the tail it holds back
    (about a millisecond) at the end of an utterance, ``reset()`` drops it (after barge-in).
    ``view(pcm)`` is a call's output without a copy, for a reader that takes any buffer (the
    μ-law encoder): the array ``soxr`` returns is read where it lies.
    """

    __slots__ = ("_stream", "source", "target")

    def __init__(self, source: int, target: int) -> None:
        self.source = source
        self.target = target
        self._stream = (
            None if source == target else soxr.ResampleStream(source, target, 1, dtype="int16")
        )

    def __call__(self, pcm: bytes) -> bytes:
        if self._stream is None:
            return pcm
        samples: np.ndarray[Any, Any] = self._stream.resample_chunk(np.frombuffer(pcm, dtype="<i2"))
        return samples.tobytes() if _LITTLE else samples.astype("<i2").tobytes()

    def view(self, pcm: bytes) -> bytes | memoryview:
        if self._stream is None:
            return pcm
        return _pcm16(self._stream.resample_chunk(np.frombuffer(pcm, dtype="<i2")))

    def flush(self) -> bytes:
        if self._stream is None:
            return b""
        tail = self._stream.resample_chunk(np.zeros(0, dtype="<i2"), last=True)
        self._stream.clear()
        return _pcm16(tail).tobytes()

    def reset(self) -> None:
        if self._stream is not None:
            self._stream.clear()
