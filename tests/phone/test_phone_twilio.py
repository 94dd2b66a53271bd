"""The Media Streams codec: every event Twilio sends, the frames we send, bad frames skipped."""

from __future__ import annotations

import base64
import json

import pytest

from livebridge.phone.twilio import (
    Dtmf,
    MarkEchoed,
    MediaIn,
    StreamStarted,
    StreamStopped,
    TwilioStream,
)

START = {
    "event": "start",
    "sequenceNumber": "1",
    "start": {
        "streamSid": "MZ1",
        "accountSid": "AC1",
        "callSid": "CA1",
        "tracks": ["inbound"],
        "customParameters": {"caller": "+15550100"},
        "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
    },
    "streamSid": "MZ1",
}


def media(payload: str) -> str:
    return json.dumps(
        {
            "event": "media",
            "streamSid": "MZ1",
            "media": {"track": "inbound", "chunk": "2", "timestamp": "40", "payload": payload},
        }
    )


def test_a_whole_stream_decodes() -> None:
    stream = TwilioStream()
    assert stream.receive(json.dumps({"event": "connected", "protocol": "Call"})) is None
    started = stream.receive(json.dumps(START))
    assert started == StreamStarted("MZ1", "CA1", {"caller": "+15550100"}, "audio/x-mulaw", 8000)
    ulaw = bytes(range(160))
    assert stream.receive(media(base64.b64encode(ulaw).decode())) == MediaIn(ulaw, 40)
    assert stream.receive(json.dumps({"event": "dtmf", "dtmf": {"digit": "7"}})) == Dtmf("7")
    mark = json.dumps({"event": "mark", "streamSid": "MZ1", "mark": {"name": "u1.1"}})
    assert stream.receive(mark) == MarkEchoed("u1.1")
    assert stream.receive(json.dumps({"event": "stop", "stop": {}})) == StreamStopped()
    assert stream.skipped == {}


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        ("{not json", "undecodable"),
        (json.dumps({"event": "hangup"}), "unknown_event"),
        (media("***not base64***"), "bad_payload"),
        (json.dumps({"event": "media", "media": {}}), "bad_payload"),
        (json.dumps({"event": "mark", "mark": {}}), "bad_mark"),
        (json.dumps({"event": "dtmf", "dtmf": {"digit": ""}}), "bad_dtmf"),
        (json.dumps({"event": "start", "start": {}}), "bad_start"),
    ],
)
def test_a_bad_frame_is_skipped_and_counted(frame: str, reason: str) -> None:
    stream = TwilioStream()
    stream.receive(json.dumps(START))
    assert stream.receive(frame) is None
    assert stream.skipped == {reason: 1}
    assert stream.receive(media(base64.b64encode(b"\xff" * 160).decode())) is not None


def test_media_before_start_is_skipped() -> None:
    stream = TwilioStream()
    assert stream.receive(media(base64.b64encode(b"\xff").decode())) is None
    assert stream.skipped == {"media_before_start": 1}
    assert not stream.started


def test_outgoing_frames_name_the_stream() -> None:
    stream = TwilioStream()
    with pytest.raises(RuntimeError, match="streamSid"):
        stream.clear()
    stream.receive(json.dumps(START))
    assert json.loads(stream.media(b"\x00\xff")) == {
        "event": "media",
        "streamSid": "MZ1",
        "media": {"payload": base64.b64encode(b"\x00\xff").decode()},
    }
    assert json.loads(stream.mark("u1.1")) == {
        "event": "mark",
        "streamSid": "MZ1",
        "mark": {"name": "u1.1"},
    }
    assert json.loads(stream.clear()) == {"event": "clear", "streamSid": "MZ1"}
