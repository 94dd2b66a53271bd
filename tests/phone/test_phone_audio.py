"""Telephone audio: μ-law and resampling both ways keep a tone's pitch and duration (measured)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from livebridge.phone.audio import (
    PHONE_RATE,
    Resampler,
    is_speech,
    pcm16_to_ulaw,
    ulaw_to_pcm16,
)
from tests.support.hypothesis_profiles import examples


def tone(frequency: float, seconds: float, rate: int, level: float = 8000) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    return (level * np.sin(2 * np.pi * frequency * t)).astype("<i2").tobytes()


def peak_hz(pcm: bytes, rate: int) -> float:
    samples = np.frombuffer(pcm, dtype="<i2").astype(float)
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    return float(np.fft.rfftfreq(len(samples), 1 / rate)[int(np.argmax(spectrum))])


def chunked(resampler: Resampler, pcm: bytes, chunk: int) -> bytes:
    """Through the resampler 20 ms at a time, as a call streams it."""
    out = b"".join(resampler(pcm[i : i + chunk]) for i in range(0, len(pcm), chunk))
    return out + resampler.flush()


@pytest.mark.parametrize("rate", [16_000, 24_000])
@pytest.mark.parametrize("frequency", [300.0, 1000.0, 3000.0])
def test_a_tone_round_trips_with_its_pitch_and_duration(rate: int, frequency: float) -> None:
    seconds = 1.0
    # the caller's side: 8 kHz μ-law in, up to the vendor's rate
    phone = pcm16_to_ulaw(tone(frequency, seconds, PHONE_RATE))
    up = chunked(Resampler(PHONE_RATE, rate), ulaw_to_pcm16(phone), 320)
    assert abs(len(up) / 2 / rate - seconds) < 0.005
    assert abs(peak_hz(up, rate) - frequency) <= 2.0
    # the model's side: its rate down to 8 kHz μ-law
    down = chunked(Resampler(rate, PHONE_RATE), tone(frequency, seconds, rate), rate // 50 * 2)
    back = ulaw_to_pcm16(pcm16_to_ulaw(down))
    assert abs(len(back) / 2 / PHONE_RATE - seconds) < 0.005
    assert abs(peak_hz(back, PHONE_RATE) - frequency) <= 2.0


def test_content_above_the_phone_band_is_filtered_not_folded() -> None:
    """5 kHz at 24 kHz would alias to 3 kHz at 8 kHz with naive decimation."""
    down = chunked(Resampler(24_000, PHONE_RATE), tone(5000, 1.0, 24_000), 960)
    samples = np.frombuffer(down, dtype="<i2").astype(float)
    assert np.sqrt(np.mean(samples**2)) < 8000 / np.sqrt(2) * 0.01


@settings(max_examples=examples(50), deadline=None)
@given(st.binary(min_size=0, max_size=400))
def test_ulaw_is_a_byte_a_sample_and_decodes_to_itself(ulaw: bytes) -> None:
    pcm = ulaw_to_pcm16(ulaw)
    assert len(pcm) == 2 * len(ulaw)
    assert ulaw_to_pcm16(pcm16_to_ulaw(pcm)) == pcm


def test_speech_is_loud_audio() -> None:
    assert is_speech(tone(300, 0.02, PHONE_RATE))
    assert not is_speech(bytes(320))
    assert not is_speech(b"")


@pytest.mark.parametrize(("source", "target"), [(24_000, PHONE_RATE), (PHONE_RATE, 16_000)])
def test_a_view_is_the_resampled_bytes_read_in_place(source: int, target: int) -> None:
    """``view`` hands the μ-law encoder soxr's output without a copy; chunk after chunk, with
    the filter's state carried, it is what ``__call__`` returns (to soxr's rounding: two
    streams differ by a few units in the last bits)."""
    pcm = tone(440.0, 0.5, source)
    chunk = source // 25 * 2  # 40 ms
    copied, viewed = Resampler(source, target), Resampler(source, target)
    for i in range(0, len(pcm), chunk):
        view = viewed.view(pcm[i : i + chunk])
        assert isinstance(view, memoryview) and not view.readonly
        expected = np.frombuffer(copied(pcm[i : i + chunk]), dtype="<i2").astype(int)
        got = np.frombuffer(view, dtype="<i2").astype(int)
        assert len(got) == len(expected) and np.abs(got - expected).max(initial=0) <= 4
        assert pcm16_to_ulaw(view) == pcm16_to_ulaw(view.tobytes())
    assert len(viewed.flush()) == len(copied.flush())
