"""``LiveSession`` attached to a running GPT-Live session through its sideband
(``SessionOptions(attach=...)``): the unmodified ``openai`` SDK's
``client.live.sideband.connect()`` against the emulator over TLS. The session is started on
the emulator's primary socket by a raw SDK client, as a SIP or WebRTC call's would be."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

import livebridge
from livebridge import LiveSession, SessionOptions
from livebridge.emulator import Emulator, LiveOptions, LiveServerSession
from livebridge.errors import ConversationBusyError, LiveSessionError, SessionEndedError
from livebridge.protocol.events import Closed, TurnComplete
from livebridge.store import MemoryStore, RedisStore
from livebridge.vendors.openai_live.config import session_config
from tests.support.gemini_sessions import collect_until
from tests.support.gpt_live_sessions import MODEL, live_client, outputs, server_errors
from tests.support.redis_server import RedisServer, redis_server
from tests.test_readme import block

__all__ = ["redis_server"]


def registry(runs: Counter[str]) -> livebridge.ToolRegistry:
    tools = livebridge.ToolRegistry()

    @tools.tool
    async def lookup_plan(user: str) -> dict[str, str]:
        """The user's plan."""
        runs["lookup_plan"] += 1
        return {"user": user, "plan": "pro"}

    @tools.tool
    async def lookup_preferences(user: str) -> dict[str, str]:
        """The user's preferences."""
        runs["lookup_preferences"] += 1
        return {"user": user, "lang": "nb"}

    return tools


class Primary:
    """The session's starter on the primary socket (a raw SDK connection): it declares the
    registry's tools, reads everything, and can answer a call itself."""

    def __init__(self, ws: Any, session_id: str) -> None:
        self.ws = ws
        self.id = session_id

    async def send(self, event: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(event))

    async def answer(self, call_id: str) -> None:
        item = {"type": "function_call_output", "call_id": call_id, "output": '{"ok":true}'}
        await self.send({"type": "response.item.create", "item": item})
        await self.send({"type": "response.create", "event_id": "primary_create"})


@asynccontextmanager
async def primary(
    emu: Emulator, tools: livebridge.ToolRegistry, config: dict[str, Any] | None = None
) -> AsyncIterator[Primary]:
    session = session_config(config or {"instructions": "Be brief."}, tools, model=MODEL)
    async with live_client(emu).live.connect() as connection:
        ws = connection._connection
        await ws.send(json.dumps({"type": "session.start", "session": session}))
        while (event := json.loads(await ws.recv()))["type"] != "session.started":
            pass

        async def drain() -> None:
            async for _ in ws:
                pass

        reader = asyncio.ensure_future(drain())
        try:
            yield Primary(ws, event["session"]["id"])
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)


def attached(
    emu: Emulator, tools: livebridge.ToolRegistry, session_id: str, **settings: Any
) -> Any:
    return LiveSession.connect(
        emu.client(),
        model=MODEL,
        tools=tools,
        options=SessionOptions(attach=session_id),
        **settings,
    )


def the_session(emu: Emulator) -> LiveServerSession:
    assert emu.live is not None
    return emu.live.sessions[0]


def from_sideband(live: LiveServerSession, kind: str) -> list[dict[str, Any]]:
    return [event for event in live.sideband_received if event["type"] == kind]


async def test_attached_session_answers_parallel_calls_once_with_one_continuation() -> None:
    runs: Counter[str] = Counter()

    async def scenario(live: LiveServerSession) -> None:
        await live.wait_until(lambda: live.started and bool(live.attached))
        await live.delegate(
            [("lookup_plan", {"user": "ada"}), ("lookup_preferences", {"user": "ada"})]
        )

    tools = registry(runs)
    async with Emulator(scenario, model=MODEL) as emu, primary(emu, tools) as starter:
        async with attached(emu, tools, starter.id) as session:
            await collect_until(session, lambda e: isinstance(e, TurnComplete))
        live = the_session(emu)
    assert runs == {"lookup_plan": 1, "lookup_preferences": 1}
    assert len(outputs(emu)) == 2
    assert len(from_sideband(live, "response.item.create")) == 2
    assert len(from_sideband(live, "response.create")) == 1
    assert live.backend.creates == 1 and live.backend.refusals == 0
    assert from_sideband(live, "session.start") == []
    assert live.verdicts == [] and server_errors(emu) == []


async def test_a_call_answered_before_the_attach_is_not_run_again() -> None:
    """The replay shows the call and the continuation that followed its answer: the call
    does not run here; a call open in the replay, and one after the attach, run once."""
    runs: Counter[str] = Counter()
    tools = registry(runs)
    attach = threading.Event()

    async def scenario(live: LiveServerSession) -> None:
        await live.wait_until(lambda: live.started)
        await live.delegate([("lookup_plan", {"user": "ada"})])  # the primary answers it
        await live.wait_until(lambda: live.backend.creates == 1)
        await live.delegate([("lookup_preferences", {"user": "ada"})])  # left open
        attach.set()
        live.shared.notify()
        await live.wait_until(lambda: bool(live.attached))
        await live.wait_until(lambda: live.backend.creates == 2)
        await live.delegate([("lookup_plan", {"user": "bob"})])

    async with Emulator(scenario, model=MODEL) as emu, primary(emu, tools) as starter:
        live = the_session(emu)
        await emu.wait_for(lambda: len(live.open_calls) == 1)
        await starter.answer(live.open_calls[0])
        await emu.wait_for(attach.is_set)
        async with attached(emu, tools, starter.id) as session:
            await collect_until(session, lambda e: isinstance(e, TurnComplete))
            await emu.wait_for(lambda: live.backend.creates == 3)
    assert runs == {"lookup_plan": 1, "lookup_preferences": 1}  # bob's plan, ada's prefs
    answered = [e["item"]["call_id"] for e in from_sideband(live, "response.item.create")]
    assert len(answered) == len(set(answered)) == 2
    assert len(from_sideband(live, "response.create")) == 2
    assert live.verdicts == [] and server_errors(emu) == []


async def test_two_attached_sessions_with_one_store_run_each_call_once(
    redis_server: RedisServer,
) -> None:
    """The conversation is the live session's id: while one process holds it, another's
    attach is refused busy; once the first leaves, the second takes over and the calls the
    first ran (answered, or answered and not yet continued) do not run again."""
    runs: Counter[str] = Counter()
    tools = registry(runs)
    store = RedisStore(redis_server.url, prefix="sideband")
    first_done = threading.Event()

    async def scenario(live: LiveServerSession) -> None:
        await live.wait_until(lambda: len(live.attached) == 1)
        # left running: the first process answers the call, its continuation not yet due
        await live.delegate([("lookup_plan", {"user": "ada"})], end=None)
        await live.wait_until(lambda: len(live.backend.answered) == 1)
        first_done.set()
        live.shared.notify()
        await live.wait_until(lambda: not live.attached)
        await live.wait_until(lambda: len(live.attached) == 1)  # the second process
        await live.end(next(iter(live.backend.running)), "completed")
        await live.wait_until(lambda: live.backend.creates == 1)
        await live.delegate([("lookup_preferences", {"user": "ada"})])

    async with Emulator(scenario, model=MODEL) as emu:
        assert emu.live is not None
        emu.live.options = LiveOptions(duplicate="ignore")  # a second output: undocumented
        try:
            async with primary(emu, tools) as starter:
                await second_process(emu, tools, store, starter, first_done)
        finally:
            await store.aclose()
        live = the_session(emu)
    assert runs == {"lookup_plan": 1, "lookup_preferences": 1}
    assert [v.case for v in live.verdicts if v.case != "T11"] == []
    assert live.backend.refusals == 0


async def second_process(
    emu: Emulator,
    tools: livebridge.ToolRegistry,
    store: RedisStore,
    starter: Primary,
    first_done: threading.Event,
) -> None:
    if True:
        live = the_session(emu)
        async with attached(emu, tools, starter.id, store=store, conversation=starter.id):
            await emu.wait_for(first_done.is_set)
            with pytest.raises(ConversationBusyError):
                async with attached(emu, tools, starter.id, store=store, conversation=starter.id):
                    pass
            assert len(live.attached) == 1
        async with attached(emu, tools, starter.id, store=store, conversation=starter.id) as second:
            await collect_until(second, lambda e: isinstance(e, TurnComplete))
            await emu.wait_for(lambda: live.backend.creates == 2)


async def test_one_store_in_memory_refuses_a_second_attach_while_the_first_holds_it() -> None:
    runs: Counter[str] = Counter()
    tools = registry(runs)
    store = MemoryStore()

    async def scenario(live: LiveServerSession) -> None:
        await live.wait_until(lambda: len(live.attached) == 1)
        await live.delegate([("lookup_plan", {"user": "ada"})])

    async with Emulator(scenario, model=MODEL) as emu, primary(emu, tools) as starter:
        live = the_session(emu)
        async with attached(
            emu, tools, starter.id, store=store, conversation=starter.id
        ) as session:
            await collect_until(session, lambda e: isinstance(e, TurnComplete))
            with pytest.raises(ConversationBusyError):
                async with attached(emu, tools, starter.id, store=store, conversation=starter.id):
                    pass
    assert runs == {"lookup_plan": 1}
    assert live.verdicts == []


async def test_the_sideband_refuses_session_start_and_livebridge_never_sends_it() -> None:
    runs: Counter[str] = Counter()
    tools = registry(runs)
    async with Emulator(None, model=MODEL) as emu, primary(emu, tools) as starter:
        live = the_session(emu)
        manager = live_client(emu).live.sideband.connect(session_id=starter.id)
        async with manager as sideband:
            ws = sideband._connection
            first = json.loads(await ws.recv())
            assert first["type"] == "session.started"
            assert first["session"]["id"] == starter.id
            start = {"type": "session.start", "event_id": "again", "session": {"model": MODEL}}
            await ws.send(json.dumps(start))
            error = json.loads(await ws.recv())
        assert error["type"] == "error"
        assert error["error"]["client_event_id"] == "again"
        assert "session.start" not in error["error"]["message"].split("Supported")[1]
        assert live.session is not None and live.session["instructions"] == "Be brief."
        async with attached(emu, tools, starter.id):
            await emu.wait_for(lambda: bool(live.attached))
    assert [e["type"] for e in live.sideband_received] == ["session.start"]


async def test_attaching_to_an_unknown_session_is_refused() -> None:
    tools = registry(Counter())
    async with Emulator(None, model=MODEL) as emu:
        with pytest.raises(LiveSessionError, match="no running GPT-Live session 'live_nope'"):
            async with attached(emu, tools, "live_nope"):
                pass


async def test_the_session_closed_by_its_starter_ends_the_attached_session_cleanly() -> None:
    """``session.closed``, then a close frame without a status (1005): a clean end, no
    error, not a lost connection."""
    tools = registry(Counter())
    async with Emulator(None, model=MODEL) as emu, primary(emu, tools) as starter:
        live = the_session(emu)
        with pytest.raises(SessionEndedError) as ended:
            async with attached(emu, tools, starter.id) as session:
                await emu.wait_for(lambda: bool(live.attached))
                await starter.send({"type": "session.close"})
                await collect_until(session, lambda e: isinstance(e, Closed))
    assert ended.value.error is None, ended.value.error


def test_attach_takes_no_config_nor_delegate() -> None:
    tools = registry(Counter())
    client = live_client_for_usage()
    with pytest.raises(livebridge.UsageError, match="takes no config"):
        LiveSession(
            client,
            model=MODEL,
            tools=tools,
            config={"instructions": "x"},
            options=SessionOptions(attach="live_1"),
        )


def live_client_for_usage() -> Any:
    import openai

    return openai.AsyncOpenAI(api_key="test", base_url="https://127.0.0.1:9/v1")


async def test_the_docs_sideband_example_runs_each_call_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """docs/vendors.md's example: its ``run_tools`` attaches and answers the call."""
    namespace: dict[str, Any] = {}
    exec(block("Sideband (SIP, WebRTC)", "docs/vendors.md"), namespace)

    async def scenario(live: LiveServerSession) -> None:
        await live.wait_until(lambda: bool(live.attached))
        await live.delegate([("lookup_order", {"order_id": "A-7"})])

    async with Emulator(scenario, model=MODEL) as emu, primary(emu, namespace["tools"]) as starter:
        live = the_session(emu)
        runner = asyncio.ensure_future(namespace["run_tools"](emu.client(), starter.id))
        await emu.wait_for(lambda: live.backend.creates == 1)
        await starter.send({"type": "session.close"})
        await asyncio.wait_for(runner, 10)
    out = capsys.readouterr().out
    assert "lookup_order: ok" in out and "call ended:" in out
    assert len(outputs(emu)) == 1 and live.verdicts == []


async def test_a_session_without_responses_delegation_is_refused_on_attach() -> None:
    client_mode = {"delegation": {"type": "client"}}
    async with (
        Emulator(None, model=MODEL) as emu,
        primary(emu, livebridge.ToolRegistry(), client_mode) as starter,
    ):
        with pytest.raises(LiveSessionError, match="delegates to 'client', not 'responses'"):
            async with attached(emu, registry(Counter()), starter.id):
                pass


async def test_tools_the_session_does_not_declare_are_named_and_audio_is_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runs: Counter[str] = Counter()
    declared = livebridge.ToolRegistry()

    @declared.tool
    async def lookup_plan(user: str) -> dict[str, str]:
        """The user's plan."""
        return {}

    @declared.tool
    async def cancel_order(order: str) -> dict[str, str]:
        """Cancel an order."""
        return {}

    async with Emulator(None, model=MODEL) as emu, primary(emu, declared) as starter:
        with caplog.at_level(logging.WARNING, "livebridge.openai_live"):
            async with attached(emu, registry(runs), starter.id) as session:
                with pytest.raises(ValueError, match="sends no audio"):
                    await session.send_audio(bytes(480))
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "declares cancel_order, which the registry lacks" in said
    assert "lookup_preferences are not declared" in said
