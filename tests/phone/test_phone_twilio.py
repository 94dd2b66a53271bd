"""The Media Streams codec: every event Twilio sends, the frames we send, bad frames skipped."""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from livebridge.phone.twilio import (
    Dtmf,
    MarkEchoed,
    MediaIn,
    StreamStarted,
    StreamStopped,
    TwilioStream,
)
from tests.support.hypothesis_profiles import examples

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
        (json.dumps({"event": "media", "media": {}}), "bad_media"),
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


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def start_with(**media_format: Any) -> str:
    frame = json.loads(json.dumps(START))
    frame["start"]["mediaFormat"].update(media_format)
    return json.dumps(frame)


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (start_with(sampleRate="8k"), "bad_start"),
        (start_with(sampleRate=None), "bad_start"),
        (start_with(sampleRate=16000), "bad_start"),
        (start_with(encoding="audio/l16"), "bad_start"),
        (json.dumps(START).replace('"+15550100"', nested(20_000)), "undecodable"),
        (json.dumps(START).replace('"+15550100"', "7"), "bad_start"),
        (json.dumps({"event": "start", "start": []}), "bad_start"),
        ('{"event": "start", "x": ' + nested(20_000) + "}", "undecodable"),
    ],
)
def test_a_bad_start_is_skipped_and_the_stream_waits_for_a_good_one(
    frame: str, reason: str
) -> None:
    stream = TwilioStream()
    assert stream.receive(frame) is None
    assert stream.skipped == {reason: 1}
    assert not stream.started
    assert isinstance(stream.receive(json.dumps(START)), StreamStarted)


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        ('{"event": "media", "media": ' + nested(20_000) + "}", "undecodable"),
        ('{"event": "mark", "mark": ' + nested(20_000) + "}", "undecodable"),
        ('{"event": "mark", "mark": {"name": ' + nested(3) + "}}", "bad_mark"),
        (
            json.dumps({"event": "media", "media": {"payload": "/w==", "timestamp": "²"}}),
            "bad_media",
        ),
        (
            json.dumps({"event": "media", "media": {"payload": "/w==", "timestamp": [1]}}),
            "bad_media",
        ),
        (json.dumps({"event": "media", "media": {"payload": 255}}), "bad_media"),
        (json.dumps({"event": "dtmf", "dtmf": {"digit": "12"}}), "bad_dtmf"),
        (json.dumps({"event": "stop", "stop": "now"}), "bad_stop"),
        (json.dumps({"event": 5}), "undecodable"),
        (json.dumps(["event", "media"]), "undecodable"),
        (b"\xff\xfe{", "undecodable"),
        ('{"event": "media\ud800"}', "undecodable"),
        (json.dumps(START), "repeated_start"),
    ],
)
def test_a_frame_of_the_wrong_shape_is_skipped(frame: str | bytes, reason: str) -> None:
    stream = TwilioStream()
    stream.receive(json.dumps(START))
    assert stream.receive(frame) is None
    assert stream.skipped == {reason: 1}
    assert stream.stream_sid == "MZ1"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=20,
)
EVENTS = st.sampled_from(["connected", "start", "media", "mark", "dtmf", "stop", "hangup"])
FIELDS = st.sampled_from(
    ["start", "media", "mark", "dtmf", "stop", "streamSid", "customParameters", "mediaFormat"]
)


@st.composite
def mangled(draw: st.DrawFn) -> str | bytes:
    """A frame of some event with a field of any type, nested at any depth, or garbage."""
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return draw(st.binary(max_size=64))
    if kind == 1:
        return json.dumps(draw(JSON))
    if kind == 3:
        depth = draw(st.integers(1, 30_000))
        deep = nested(depth) if draw(st.booleans()) else '{"a": ' * depth + "1" + "}" * depth
        return f'{{"event": "{draw(EVENTS)}", "{draw(FIELDS)}": {deep}}}'
    body: Any = draw(JSON)
    frame = json.loads(json.dumps(START))
    frame["event"] = draw(EVENTS)
    target = draw(st.sampled_from([frame, frame["start"], frame["start"]["mediaFormat"]]))
    target[draw(FIELDS | st.sampled_from(["sampleRate", "encoding", "payload", "name"]))] = body
    return json.dumps(frame)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(mangled(), min_size=1, max_size=8))
def test_receive_never_raises(frames: list[str | bytes]) -> None:
    stream = TwilioStream()
    stream.receive(json.dumps(START))
    for frame in frames:
        event = stream.receive(frame)
        assert (event is None) or stream.last_skipped is None
        assert stream.stream_sid == "MZ1"
    assert stream.receive(media(base64.b64encode(b"\xff" * 160).decode())) is not None


def test_skipped_frames_are_counted_and_logged_at_most_once_a_while(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    stream = TwilioStream(clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="livebridge.phone"):
        for _ in range(1_000):
            stream.receive("{not json")
        assert len(caplog.records) == 1
        now[0] = 10.0
        stream.receive("{not json")
    assert stream.skipped == {"undecodable": 1_001}
    first, second = (record.getMessage() for record in caplog.records)
    assert "more skipped" not in first
    assert second.endswith("(999 more skipped since the last warning)")


@settings(max_examples=examples(200))
@given(
    sid=st.text(min_size=1, max_size=40),
    frames=st.lists(st.binary(max_size=400), min_size=1, max_size=4),
)
def test_media_frames_are_the_json_of_their_fields_byte_for_byte(
    sid: str, frames: list[bytes]
) -> None:
    """The frame's head is encoded once per stream: every frame is still exactly the JSON a
    generic encoder gives its fields, whatever the streamSid (quotes, control characters, non
    ASCII), and a streamSid set anew is the one the next frame names."""
    stream = TwilioStream()
    stream.receive(json.dumps(START))
    stream.media(b"\x00")
    stream.stream_sid = sid
    for ulaw in frames:
        generic = {"event": "media", "streamSid": sid, "media": {"payload": b64(ulaw)}}
        assert stream.media(ulaw) == msgspec.json.encode(generic).decode()


@settings(max_examples=examples(200))
@given(st.binary(max_size=400))
def test_a_payload_decodes_to_its_bytes(ulaw: bytes) -> None:
    stream = TwilioStream()
    stream.receive(json.dumps(START))
    event = stream.receive(media(b64(ulaw)))
    assert event == MediaIn(ulaw, 40)


@pytest.mark.parametrize("payload", ["AP8", "AP8=x", "=AP8", "AP 8=", "AP8=\n", "AP\u00e98="])
def test_a_payload_not_strictly_base64_is_skipped(payload: str) -> None:
    stream = TwilioStream()
    stream.receive(json.dumps(START))
    assert stream.receive(media(payload)) is None
    assert stream.skipped == {"bad_payload": 1}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
