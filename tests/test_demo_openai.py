"""``livebridge demo --vendor openai``: the same conversation and tools over OpenAI Realtime."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from livebridge.cli.main import main
from livebridge.demo.driver import run_demo


def test_demo_on_openai_reports_the_whole_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo", "--json", "--fast", "--vendor", "openai"])
    summary = json.loads(capsys.readouterr().out)

    assert code == 0 and summary["ok"] is True
    assert summary["violations"] == 0 and summary["lost_calls"] == 0
    outcomes = summary["outcomes"]
    assert outcomes["error"] == 1 and outcomes["timeout"] == 1 and outcomes["cancelled"] == 1
    assert summary["calls"] == sum(outcomes.values()) == 8
    assert summary["connections"] == 1
    first = summary["turns"][0]
    assert len(first["calls"]) == 5 and first["serial_ms"] > first["turnaround_ms"]
    booking = summary["turns"][1]["calls"][0]  # no NON_BLOCKING on OpenAI: one answer
    assert booking["name"] == "book_table" and booking["responses"] == 1
    assert "reference JN-4821" in " ".join(summary["turns"][1]["replies"])
    barge_in = summary["turns"][2]
    assert [c["outcome"] for c in barge_in["calls"]] == ["cancelled", "ok"]
    assert barge_in["calls"][0]["responses"] == 0  # its response was cancelled: never answered


async def test_demo_on_openai_answers_every_call_once_and_creates_once_per_batch() -> None:
    run = await run_demo(pace=0.2, vendor="openai")
    client = [e.message for e in run.transcript if e.direction == "client"]
    outputs = Counter(
        m["item"]["call_id"]
        for m in client
        if m.get("type") == "conversation.item.create"
        and m["item"].get("type") == "function_call_output"
    )
    assert set(outputs.values()) == {1} and len(outputs) == run.summary["answered_calls"] == 7
    assert run.summary["transcript"]["cancelled_calls"] == 1
    assert [v for v in run.violations if v.severity == "error"] == []
