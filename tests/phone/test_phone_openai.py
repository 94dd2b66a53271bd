"""A phone on OpenAI Realtime takes μ-law both ways as is (audio/pcmu); the calls themselves are
tested for both vendors in ``test_phone_bridge.py``."""

from __future__ import annotations

import pytest

from livebridge.calls.tools import ToolRegistry
from livebridge.vendors.openai.protocol import OpenAIRealtimeProtocol


def test_the_protocol_takes_8_khz_ulaw_for_audio_pcmu() -> None:
    phone = OpenAIRealtimeProtocol(ToolRegistry(), g711=(True, True))
    assert (phone.input_encoding, phone.input_rate(None), phone.input_rate(8000)) == (
        "pcmu",
        8000,
        8000,
    )
    with pytest.raises(ValueError, match="8 kHz"):
        phone.input_rate(24_000)
    pcm = OpenAIRealtimeProtocol(ToolRegistry())
    assert (pcm.input_encoding, pcm.input_rate(None)) == ("pcm16", 24_000)
