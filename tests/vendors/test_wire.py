"""The wire codec: real samples decode with it and with the SDK; casing; errors; base64."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from google.genai import _live_converters, types

from livebridge.emulator.shared import cap_reason
from livebridge.errors import WireError
from livebridge.protocol.encoding import b64decode, b64encode
from livebridge.vendors.gemini import wire
from livebridge.vendors.gemini.wire import parse_duration
from tests.support.deep_nesting import TOO_DEEP_FOR_ANY_PYTHON

#: Real and captured Live messages, each with its public source (see the file's "source" fields).
SAMPLES = Path(__file__).parent.parent / "data" / "live_wire_samples.jsonl"
SERVER_EXAMPLES: list[dict[str, Any]] = [
    {"setupComplete": {"sessionId": "abc"}},
    {
        "serverContent": {
            "modelTurn": {
                "parts": [{"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": "AAA="}}]
            }
        }
    },
    {"serverContent": {"outputTranscription": {"text": "Hello"}}},
    {"serverContent": {"interrupted": True}},
    {"serverContent": {"generationComplete": True}},
    {
        "serverContent": {
            "turnComplete": True,
            "turnCompleteReason": "NEED_MORE_INPUT",
            "waitingForInput": True,
        },
        "usageMetadata": {
            "promptTokenCount": 100,
            "responseTokenCount": 20,
            "totalTokenCount": 120,
            "promptTokensDetails": [{"modality": "AUDIO", "tokenCount": 90}],
        },
    },
    {
        "toolCall": {
            "functionCalls": [
                {"id": "function-call-123", "name": "get_weather", "args": {"city": "Paris"}}
            ]
        }
    },
    {"toolCallCancellation": {"ids": ["function-call-123"]}},
    {"voiceActivity": {"type": "ACTIVITY_START"}},
    {"voiceActivityDetectionSignal": {"vadSignalType": "VAD_SIGNAL_TYPE_SOS"}},
]


def samples(direction: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in SAMPLES.read_text().splitlines() if line.strip()]
    return [
        s["message"]
        for s in lines
        if s["direction"] == direction and "websocket_close" not in s["message"]
    ]


def sdk_parse(message: dict[str, Any]) -> types.LiveServerMessage:
    """Parse exactly as ``AsyncSession._receive`` does."""
    converted = _live_converters._LiveServerMessage_from_mldev(message)
    return types.LiveServerMessage._from_response(response=converted, kwargs={})


def test_every_server_sample_decodes_with_wire_and_sdk() -> None:
    for message in samples("server") + SERVER_EXAMPLES:
        decoded = wire.decode_server(json.dumps(message).encode())
        parsed = sdk_parse(message)
        assert set(wire.to_builtins(decoded)) == set(message)
        reparsed = sdk_parse(json.loads(wire.encode(decoded)))
        assert reparsed.model_dump(exclude_none=True) == parsed.model_dump(exclude_none=True)


def test_proto3_strings_are_coerced() -> None:
    decoded = wire.decode_server(
        b'{"sessionResumptionUpdate": {"newHandle": "h", "resumable": "true", '
        b'"lastConsumedClientMessageIndex": "123456789"}}'
    )
    update = decoded.session_resumption_update
    assert update is not None
    assert (update.resumable, update.last_consumed_client_message_index) == (True, 123456789)


def test_unknown_server_fields_are_ignored() -> None:
    decoded = wire.decode_server(b'{"toolCall": {"functionCalls": [], "future": 1}, "novel": {}}')
    assert decoded.tool_call == wire.ToolCall()


CLIENT_EXAMPLES: list[dict[str, Any]] = [
    {
        "client_content": {
            "turns": [{"parts": [{"text": "hi"}], "role": "user"}],
            "turnComplete": True,
        }
    },
    {"realtime_input": {"audio": {"data": "AAEAAQABAAE=", "mime_type": "audio/pcm;rate=16000"}}},
    {"realtime_input": {"video": {"data": "_9g=", "mime_type": "image/jpeg"}}},
    {"realtime_input": {"activityEnd": {}}},
    {
        "tool_response": {
            "functionResponses": [{"id": "function-call-2", "name": "f", "response": {}}]
        }
    },
]


def test_every_client_sample_decodes_in_either_casing() -> None:
    for message in samples("client") + CLIENT_EXAMPLES:
        decoded = wire.decode_client(json.dumps(message))
        assert sum(value is not None for value in wire.to_builtins(decoded).values()) == 1


def test_user_data_keeps_its_casing() -> None:
    message = {
        "tool_response": {
            "function_responses": [
                {
                    "id": "a",
                    "name": "f",
                    "will_continue": True,
                    "response": {"output": {"snake_key": 1, "nested_list": [{"x_y": 2}]}},
                }
            ]
        }
    }
    decoded = wire.decode_client(json.dumps(message))
    assert decoded.tool_response is not None
    response = decoded.tool_response.function_responses[0]
    assert response.will_continue is True
    assert response.response == {"output": {"snake_key": 1, "nested_list": [{"x_y": 2}]}}
    setup = {
        "setup": {
            "tools": [
                {
                    "function_declarations": [
                        {
                            "name": "f",
                            "parameters_json_schema": {
                                "type": "object",
                                "properties": {"city_name": {"type": "string"}},
                                "additional_properties": False,
                            },
                        }
                    ]
                }
            ]
        }
    }
    normalized = wire.normalize_keys(setup)
    declaration = normalized["setup"]["tools"][0]["functionDeclarations"][0]
    assert declaration["parametersJsonSchema"]["properties"] == {"city_name": {"type": "string"}}
    assert "additional_properties" in declaration["parametersJsonSchema"]


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        ("not json", "Invalid JSON payload received. Unexpected token."),
        (
            '{"tool_response": {"function_responses": [{"id": "x", "scheduling": "NOW"}]}}',
            "Invalid JSON payload received. Invalid value at "
            "'tool_response.function_responses[0].scheduling': Invalid enum value 'NOW'",
        ),
        (
            '{"bogus": {}}',
            'Invalid JSON payload received. Unknown name "bogus": Cannot find field.',
        ),
        ("[1]", "Invalid JSON payload received. Expected an object."),
    ],
)
def test_malformed_client_frames_get_the_service_reason(frame: str, reason: str) -> None:
    with pytest.raises(WireError) as error:
        wire.decode_client(frame)
    assert error.value.reason == reason


def test_base64_standard_and_url_safe() -> None:
    assert b64decode("_9g=") == b64decode("/9g=") == b64decode("/9g") == b"\xff\xd8"
    assert b64decode(b64encode(b"\x00\xfe\xff")) == b"\x00\xfe\xff"
    with pytest.raises(WireError):
        b64decode("**")


def test_encoding_omits_defaults_and_uses_camel_case() -> None:
    message = wire.ServerMessage(
        server_content=wire.ServerContent(turn_complete=True),
        usage_metadata=wire.UsageMetadata(total_token_count=3),
    )
    assert wire.encode(message) == (
        b'{"serverContent":{"turnComplete":true},"usageMetadata":{"totalTokenCount":3}}'
    )


def test_close_reason_cap_and_durations() -> None:
    assert cap_reason("a" * 200) == "a" * 123
    assert cap_reason("€" * 50).encode() == ("€" * 41).encode()
    assert (parse_duration("50s"), parse_duration("0.5s")) == (50.0, 0.5)
    with pytest.raises(ValueError):
        parse_duration("soon")


def test_server_kinds_name_every_field_once() -> None:
    fields = {wire.camel(name) for name in wire.ServerMessage.__struct_fields__}
    assert set(wire.SERVER_KINDS) == fields
    assert len(wire.SERVER_KINDS) == len(fields)
    message = wire.decode_server(b'{"goAway": {}, "toolCall": {}, "setupComplete": {}}')
    assert list(wire.server_kinds(message)) == ["setupComplete", "toolCall", "goAway"]


def test_snake_case_server_frames_decode_like_camel_case() -> None:
    camel_frame = (
        b'{"toolCall": {"functionCalls": [{"id": "a", "name": "f", "args": {"my_key": 1}}]}}'
    )
    snake_frame = (
        b'{"tool_call": {"function_calls": [{"id": "a", "name": "f", "args": {"my_key": 1}}]}}'
    )
    assert wire.decode_server(snake_frame) == wire.decode_server(camel_frame)
    assert wire.decode_server(b"{}") == wire.ServerMessage()
    assert wire.decode_server(b'{"somethingNew": 1}') == wire.ServerMessage()


def test_a_call_nested_too_deep_is_marked_and_its_siblings_decode() -> None:
    depth = TOO_DEEP_FOR_ANY_PYTHON
    deep = b'{"id":"d","name":"f","args":' + b'{"a":' * depth + b'"]}\\""' + b"}" * (depth + 1)
    frame = b'{"toolCall":{"functionCalls":[' + deep + b',{"id":"ok","args":{"x":[1]}}]}}'
    calls = wire.decode_server(frame).tool_call
    assert calls is not None
    assert [(c.id, c.args) for c in calls.function_calls] == [
        ("d", wire.TOO_DEEP),
        ("ok", {"x": [1]}),
    ]


@pytest.mark.parametrize(
    ("mime", "rate"),
    [
        ("audio/pcm;rate=16000", 16_000),
        ("audio/pcm; rate=24000", 24_000),
        ("audio/pcm", 24_000),
        (None, 24_000),
        ("audio/pcm;rate=fast", 24_000),
    ],
)
def test_audio_rate(mime: str | None, rate: int) -> None:
    assert wire.audio_rate(mime) == rate
