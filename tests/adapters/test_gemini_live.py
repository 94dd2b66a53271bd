from typing import Any

import pytest
from google.genai import _common, _transformers, types

from livebridge.calls.call import Behavior, Outcome, Partial, Scheduling
from livebridge.vendors.gemini import answers as gemini_live

OK = Outcome("c1", "f", "ok", {"output": 1})
OK_INTERRUPT = Outcome("c1", "f", "ok", {"output": 1}, scheduling="INTERRUPT")
END = Outcome("c1", "f", "ok", {})
ITEM = Partial("c1", "f", {"output": "a"})
ITEM_SILENT = Partial("c1", "f", {"output": "a"}, scheduling="SILENT")
BASE = {"id": "c1", "name": "f"}


@pytest.mark.parametrize(
    ("answer", "behavior", "default", "streaming", "expected"),
    [
        # BLOCKING: never scheduling nor willContinue, whatever the tool or result says
        (OK, "BLOCKING", None, False, {**BASE, "response": {"output": 1}}),
        (OK_INTERRUPT, "BLOCKING", "SILENT", False, {**BASE, "response": {"output": 1}}),
        # NON_BLOCKING: the result's choice, else the tool default, else nothing
        (OK, "NON_BLOCKING", None, False, {**BASE, "response": {"output": 1}}),
        (
            OK,
            "NON_BLOCKING",
            "SILENT",
            False,
            {**BASE, "response": {"output": 1}, "scheduling": "SILENT"},
        ),
        (
            OK_INTERRUPT,
            "NON_BLOCKING",
            "SILENT",
            False,
            {**BASE, "response": {"output": 1}, "scheduling": "INTERRUPT"},
        ),
        # streaming: items continue, the end stops (an empty response is allowed there)
        (
            ITEM,
            "NON_BLOCKING",
            "WHEN_IDLE",
            True,
            {**BASE, "response": {"output": "a"}, "scheduling": "WHEN_IDLE", "willContinue": True},
        ),
        (
            ITEM_SILENT,
            "NON_BLOCKING",
            "WHEN_IDLE",
            True,
            {**BASE, "response": {"output": "a"}, "scheduling": "SILENT", "willContinue": True},
        ),
        (END, "NON_BLOCKING", None, True, {**BASE, "response": {}, "willContinue": False}),
    ],
)
def test_encode(
    answer: Outcome | Partial,
    behavior: Behavior,
    default: Scheduling | None,
    streaming: bool,
    expected: dict[str, Any],
) -> None:
    encoded = gemini_live.encode(answer, behavior=behavior, scheduling=default, streaming=streaming)
    assert encoded == expected


@pytest.mark.parametrize(("behavior", "streaming"), [("BLOCKING", False), ("NON_BLOCKING", False)])
def test_items_only_for_streaming_non_blocking(behavior: Behavior, streaming: bool) -> None:
    with pytest.raises(ValueError, match="c1"):
        gemini_live.encode(ITEM, behavior=behavior, streaming=streaming)


def test_tool_response_message() -> None:
    responses = [gemini_live.encode(OK, behavior="BLOCKING")]
    assert gemini_live.tool_response(responses) == {
        "toolResponse": {"functionResponses": [{**BASE, "response": {"output": 1}}]}
    }


def test_to_sdk_keeps_every_field() -> None:
    responses = [
        gemini_live.encode(ITEM, behavior="NON_BLOCKING", scheduling="INTERRUPT", streaming=True),
        gemini_live.encode(END, behavior="NON_BLOCKING", streaming=True),
        {"id": "c2", "name": "g", "response": {"error": {"type": "timeout"}}},
    ]
    sdk = gemini_live.to_sdk(responses)
    assert sdk[0] == types.FunctionResponse(
        id="c1",
        name="f",
        response={"output": "a"},
        scheduling=types.FunctionResponseScheduling.INTERRUPT,
        will_continue=True,
    )
    assert sdk[1].will_continue is False
    assert sdk[1].scheduling is None
    assert sdk[2].response == {"error": {"type": "timeout"}}
    # What send_tool_response puts on the wire (its own conversion, run for real).
    wire = _common.convert_to_dict(_transformers.t_tool_response(sdk), convert_keys=True)
    sent = wire["functionResponses"]
    assert sent[0]["scheduling"] == "INTERRUPT"
    assert sent[0]["will_continue"] is True
    assert sent[1] == {"id": "c1", "name": "f", "response": {}, "will_continue": False}
    assert [r["id"] for r in sent] == ["c1", "c1", "c2"]
