"""The model profile table and what ``ModelProfile.adapt`` makes of a registry, without sockets."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from livebridge import ModelCapabilityError, ToolRegistry, profiles
from livebridge.profiles import ModelProfile, profile_for


def registry() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool
    async def look(city: str) -> str:
        return city

    @tools.tool(behavior="BLOCKING")
    async def pay(amount: int) -> int:
        return amount

    @tools.tool(behavior="NON_BLOCKING", scheduling="WHEN_IDLE")
    async def notify(text: str) -> str:
        return text

    @tools.tool(behavior="NON_BLOCKING")
    async def progress(steps: int) -> AsyncIterator[int]:
        for step in range(steps):
            yield step

    return tools


@pytest.mark.parametrize(
    ("model", "backend", "family"),
    [
        ("gemini-3.8-live", "developer", "gemini-3.8-live"),
        ("models/gemini-3.8-live", "developer", "gemini-3.8-live"),
        ("gemini-3.8-live-extended-thinking", "developer", "gemini-3.8-live-extended-thinking"),
        ("gemini-3.1-flash-live-preview", "developer", "gemini-3.1-flash-live"),
        (
            "gemini-2.5-flash-native-audio-preview-09-2025",
            "developer",
            "gemini-2.5-flash-native-audio",
        ),
        ("gemini-live-2.5-flash-preview", "vertex", "gemini-live-2.5-flash"),
        (
            "projects/p/locations/us-central1/publishers/google/models/gemini-3.8-live",
            "vertex",
            "gemini-3.8-live",
        ),
        ("gpt-realtime", "openai", "gpt-realtime"),
        ("gpt-realtime-2025-08-28", "openai", "gpt-realtime"),
        ("gpt-realtime-2", "openai", "gpt-realtime-2"),
        ("gpt-realtime-2.1-preview", "openai", "gpt-realtime-2"),
    ],
)
def test_known_models_find_their_row(model: str, backend: profiles.Backend, family: str) -> None:
    profile = profile_for(model, backend)
    assert (profile.family, profile.backend, profile.known) == (family, backend, True)
    assert profile.sources, "every row says where its facts come from"


def test_what_each_generation_does_with_an_undeclared_function() -> None:
    assert profile_for("gemini-3.8-live", "developer").undeclared_behavior == "NON_BLOCKING"
    assert profile_for("gemini-2.5-flash-native-audio", "developer").undeclared_behavior == (
        "BLOCKING"
    )
    thinking = profile_for("gemini-3.8-live-extended-thinking", "developer")
    assert thinking.behaviors == {"NON_BLOCKING"} and thinking.default_behavior == "NON_BLOCKING"
    assert profile_for("gemini-3.8-live", "developer").input_cancels_blocking
    assert not profile_for("gemini-2.5-flash-native-audio", "developer").input_cancels_blocking


def test_vertex_is_the_backend_without_ids_or_will_continue() -> None:
    for family in {p.family for p in profiles.PROFILES if p.vendor == "gemini"}:
        developer, vertex = profile_for(family, "developer"), profile_for(family, "vertex")
        assert developer.call_ids
        assert vertex.call_ids == family.startswith("gemini-3.8")  # 3.8 on Vertex has ids
        assert not vertex.will_continue
    assert profile_for("gemini-2.5-flash-native-audio", "vertex").schedulings == frozenset()
    assert profile_for("gemini-3.8-live", "vertex").schedulings == {
        "SILENT",
        "WHEN_IDLE",
        "INTERRUPT",
    }


def test_an_unknown_model_gets_the_documented_defaults_and_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, "livebridge.profiles"):
        first = profile_for("gemini-9-live-unheard-of", "developer")
        again = profile_for("models/gemini-9-live-unheard-of", "developer")
        assert caplog.records == []  # not before the service has accepted the name
        profiles.warn_unknown(first)
        profiles.warn_unknown(again)
        profiles.warn_unknown(profile_for("gemini-3.8-live", "developer"))  # known: silent
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "'gemini-9-live-unheard-of'" in warnings[0]
    assert first == again and not first.known
    assert first.family == "gemini-9-live-unheard-of"
    assert first.undeclared_behavior == "BLOCKING" and first.will_continue and first.call_ids


def test_adapt_states_every_behavior_and_keeps_the_app_registry() -> None:
    tools = registry()
    adapted = profile_for("gemini-3.8-live", "developer").adapt(tools)
    assert adapted is not tools
    assert [(t.name, t.behavior, t.streaming) for t in adapted] == [
        ("look", "BLOCKING", False),
        ("pay", "BLOCKING", False),
        ("notify", "NON_BLOCKING", False),
        ("progress", "NON_BLOCKING", True),
    ]
    assert [d.behavior for d in adapted.declarations()] == [
        "BLOCKING",
        "BLOCKING",
        "NON_BLOCKING",
        "NON_BLOCKING",
    ]
    assert tools.get("look") is not adapted.get("look")
    assert adapted.get("look").limiter is tools.get("look").limiter  # type: ignore[union-attr]


def test_extended_thinking_runs_default_tools_non_blocking_and_refuses_explicit_blocking() -> None:
    thinking = profile_for("gemini-3.8-live-extended-thinking", "developer")
    with pytest.raises(ModelCapabilityError) as raised:
        thinking.adapt(registry())
    message = str(raised.value)
    assert "'pay'" in message and "gemini-3.8-live-extended-thinking" in message
    assert "behavior='NON_BLOCKING'" in message  # the fix
    assert "'look'" not in message  # a default tool adapts
    tools = registry()
    tools.remove("pay")
    adapted = thinking.adapt(tools)
    assert adapted.get("look").behavior == "NON_BLOCKING"  # type: ignore[union-attr]


def test_a_model_without_non_blocking_calls_runs_them_blocking(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, "livebridge.profiles"):
        adapted = profile_for("gemini-3.1-flash-live-preview", "developer").adapt(registry())
    assert {t.behavior for t in adapted} == {"BLOCKING"}
    notify = adapted.get("notify")
    assert notify is not None and notify.scheduling is None
    progress = adapted.get("progress")
    assert progress is not None and not progress.streaming  # its items make one answer
    assert sum("runs BLOCKING here" in r.getMessage() for r in caplog.records) == 2


def test_vertex_collects_streams_and_refuses_scheduling_where_it_must() -> None:
    tools = registry()
    tools.remove("pay")
    with pytest.raises(ModelCapabilityError, match="'notify' asks for scheduling='WHEN_IDLE'"):
        profile_for("gemini-2.5-flash-native-audio", "vertex").adapt(tools)
    adapted = profile_for("gemini-3.8-live", "vertex").adapt(tools)
    progress = adapted.get("progress")
    assert progress is not None and not progress.streaming


def test_every_row_is_consistent() -> None:
    for profile in profiles.PROFILES:
        assert profile.behaviors, profile.family
        assert profile.undeclared_behavior in profile.behaviors
        if "NON_BLOCKING" not in profile.behaviors:
            assert not profile.will_continue
        if profile.vendor == "openai":
            assert profile.backend == "openai" and profile.handle_seconds is None
    assert isinstance(profiles.DEVELOPER_DEFAULT, ModelProfile)
