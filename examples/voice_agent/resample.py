"""16 kHz → 24 kHz for OpenAI Realtime, which takes PCM16 at 24 kHz only (the page sends 16 kHz)."""

from __future__ import annotations

import sys
from array import array

__all__ = ["upsample_16k_to_24k"]


def upsample_16k_to_24k(pcm: bytes) -> bytes:
    """16-bit mono PCM at 16 kHz as 24 kHz, by linear interpolation (3 samples per 2).

    Pure Python (about 50 ms of CPU per second of audio): fine for an example, use a real
    resampler in production. Each frame is resampled on its own, so its last sample is held
    rather than blended with the next frame's first.
    """
    source = array("h", pcm)
    if sys.byteorder == "big":
        source.byteswap()
    count = len(source)
    out = array("h", bytes(2 * (count * 3 // 2)))
    for j in range(len(out)):
        position = j * 2 / 3
        i = int(position)
        later = source[i + 1] if i + 1 < count else source[i]
        out[j] = int(source[i] + (later - source[i]) * (position - i))
    if sys.byteorder == "big":
        out.byteswap()
    return out.tobytes()
