"""A seeded world of faults for the exactly-once contract: drawn cases, tools, server scripts.

A ``Case`` is drawn from one integer seed (same seed, same case): a batch of calls whose
handlers misbehave in chosen ways, one fault of the server, and what the app does. ``World``
holds one run of a case: the tools (which count every handler run, per request), the scenario
the emulator plays and the notes both sides leave. ``tests/test_contract_faults.py`` judges it.

The handlers run on the session's event loop (or its worker threads); the scenario runs on the
emulator's thread. They meet through ``threading.Event``s (a handler has started) and ``Signal``s
(the scenario lets a handler finish), never through sleeps.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio

import livebridge
from livebridge.emulator import Conversation, Emulator, Signal
from livebridge.protocol.transport import TransportKind

#: Per-call timeout of the quick tools; ``hold`` waits for the scenario, so it gets longer.
QUICK_TIMEOUT = 0.4
HOLD_TIMEOUT = 5.0
#: A handler that swallows ``CancelledError`` gives up only after this many seconds.
SWALLOW_SECONDS = 4.0
#: A sync handler blocks its thread until the run ends, or this long at most.
BLOCK_SECONDS = 1.5
#: How long the scenario waits for answers before it moves on (and says ``END``).
ANSWER_WAIT = 2.5
#: What a huge result weighs before truncation.
HUGE_RESULT = 400_000
#: The text that tells the app the script is over.
END = "END"

#: Handler modes per tool: each is one way a handler can behave.
MODES: dict[str, tuple[str, ...]] = {
    "act": (
        "ok",
        "slow",
        "raise",
        "tool_error",
        "hang",
        "swallow",
        "huge",
        "nan",
        "set",
        "object",
    ),
    "act_sync": ("ok", "raise", "block"),
    "notify": ("ok", "raise", "hang", "nan"),
    "progress": ("stream", "stream_slow"),
    "hold": ("gate",),
}
#: Every (tool, mode) pair; the ones that wedge sessions are drawn more often.
_HANDLER_FAULTS = tuple((tool, mode) for tool, modes in MODES.items() for mode in modes)
_HANDLER_SERVER_WEIGHTS = [
    {"block": 4, "swallow": 2, "hang": 2}.get(m, 1) for _, m in _HANDLER_FAULTS
]
#: Results JSON cannot carry: they must be answered as errors, never as ``ok``.
UNSERIALIZABLE = frozenset({"nan", "object"})
#: Each tool's timeout (seconds).
TIMEOUTS = {tool: HOLD_TIMEOUT if tool == "hold" else QUICK_TIMEOUT for tool in MODES}

#: Faults of the server; each one that needs a call still running puts a ``hold`` call last.
SERVER_FAULTS = (
    "none",
    "close_1000",
    "close_1006",
    "close_1007",
    "close_1008",
    "close_1011",
    "go_away",
    "stale_handle",
    "cancel_before",
    "cancel_during",
    "cancel_at_settle",
    "reissue_running",
    "repeat_after_ack",
    "interrupted",
)
#: How often each server fault is drawn relative to the others (2 unless listed).
_SERVER_WEIGHTS = {"none": 5, "repeat_after_ack": 4, "close_1000": 1, "close_1008": 1}
_NEEDS_HOLD = frozenset(SERVER_FAULTS) - {"none", "repeat_after_ack"}
MALFORMED = ("args_not_object", "id_not_string", "name_not_string")
#: The models a case runs on: the contract holds on each generation's profile.
MODELS = (
    "gemini-2.5-flash-native-audio-preview-09-2025",
    "gemini-3.8-live",
    "gemini-3.1-flash-live-preview",
    "gemini-3.8-live-extended-thinking",
)
#: Faults that name calls by id: a Vertex case (calls without ids) never draws them.
_NEEDS_IDS = frozenset({"cancel_before", "cancel_during", "cancel_at_settle"})
CLOSE_REASONS = {
    1000: "",
    1007: "Request contains an invalid argument.",
    1008: "Operation is not implemented, or supported, or enabled.",
    1011: "Internal error occurred.",
}


@dataclass(frozen=True, slots=True)
class CallPlan:
    """One call of the batch: which tool, how its handler behaves, and its request tag."""

    tool: str
    mode: str
    tag: int

    @property
    def args(self) -> dict[str, Any]:
        if self.tool == "hold":
            return {"tag": self.tag}
        return {"mode": self.mode, "tag": self.tag}

    def __str__(self) -> str:
        return f"{self.tool}:{self.mode}#{self.tag}"


@dataclass(frozen=True, slots=True)
class Case:
    """Everything one seed decides."""

    seed: int
    transport: TransportKind
    handle_first: bool
    calls: tuple[CallPlan, ...]
    malformed: str | None
    twice: bool
    server: str
    leave_mid_batch: bool
    max_parallel: int
    max_result_bytes: int
    model: str = MODELS[0]
    vertex: bool = False  # on Vertex AI (express mode): the calls come without ids

    @property
    def target(self) -> CallPlan:
        """The call the server fault is about: the ``hold`` call last in the batch, if any."""
        return self.calls[-1] if self.server in _NEEDS_HOLD else self.calls[0]

    @property
    def faults(self) -> frozenset[str]:
        """Every fault this case draws, by name (``twice``, ``malformed:<kind>``, ...)."""
        names = {self.server, *(f"handler:{c.mode}" for c in self.calls)}
        if self.malformed:
            names.add(f"malformed:{self.malformed}")
        if self.twice:
            names.add("twice")
        if self.leave_mid_batch:
            names.add("leave_mid_batch")
        if not self.handle_first:
            names.add("no_handle")
        names.add(f"model:{self.model}")
        if self.vertex:
            names.add("vertex")
        return frozenset(names)

    def describe(self) -> str:
        calls = " ".join(str(c) for c in self.calls)
        extras = [
            f"model={self.model}{' on Vertex' if self.vertex else ''}",
            f"transport={self.transport}",
            f"max_parallel={self.max_parallel}",
            f"max_result_bytes={self.max_result_bytes}",
        ]
        if not self.handle_first:
            extras.append("no handle before the batch")
        if self.malformed:
            extras.append(f"malformed sibling: {self.malformed}")
        if self.twice:
            extras.append("each call also in modelTurn")
        if self.leave_mid_batch:
            extras.append("app leaves mid-batch")
        return f"seed {self.seed}: server {self.server}; calls [{calls}]; " + ", ".join(extras)


def draw_case(seed: int) -> Case:
    """The case of ``seed``: the same seed always gives the same case."""
    rng = random.Random(seed)
    server = rng.choices(SERVER_FAULTS, weights=[_SERVER_WEIGHTS.get(f, 2) for f in SERVER_FAULTS])[
        0
    ]
    count = rng.randint(1, 5)
    calls: list[CallPlan] = []
    for tag in range(1, count + 1):
        if tag == count and server in _NEEDS_HOLD:
            calls.append(CallPlan("hold", "gate", tag))
            continue
        tool, mode = rng.choices(_HANDLER_FAULTS, weights=_HANDLER_SERVER_WEIGHTS)[0]
        calls.append(CallPlan(tool, mode, tag))
    transport: TransportKind = rng.choices(("wire", "sdk"), weights=(3, 1))[0]
    malformed = rng.choice(MALFORMED) if rng.random() < 0.25 else None
    handle_first = rng.random() < 0.9
    twice = rng.random() < 0.25
    leave_mid_batch = rng.random() < 0.2
    max_parallel = rng.choice((1, 2, 4))
    max_result_bytes = rng.choice((65_536, 262_144))
    # Drawn last, so that the draws above stay what they were before models were drawn.
    model = rng.choice(MODELS)
    # Vertex: calls without ids, so nothing that names one by id (cancellations, the same id
    # delivered twice, a malformed id); a 3.x model (2.x on Vertex refuses the tools' scheduling).
    vertex = (
        model.startswith("gemini-3")
        and server not in _NEEDS_IDS
        and malformed is None
        and not twice
        and rng.random() < 0.5
    )
    return Case(
        seed=seed,
        # The "sdk" transport reads through the SDK's models, which reject such a frame whole
        # before livebridge sees it (documented); the default "wire" transport takes it apart.
        transport="wire" if malformed else transport,
        handle_first=handle_first,
        calls=tuple(calls),
        malformed=malformed,
        twice=twice,
        server=server,
        leave_mid_batch=leave_mid_batch,
        max_parallel=max_parallel,
        max_result_bytes=max_result_bytes,
        model=model,
        vertex=vertex,
    )


@dataclass(slots=True)
class Issued:
    """Ids the scenario gave the calls of the batch, by tag; the repeated request's id; the
    malformed call's id (as a string)."""

    ids: dict[int, str] = field(default_factory=dict)
    repeat_id: str | None = None
    malformed_id: str | None = None


class World:
    """One run of a case: its tools, its scenario and what both sides saw."""

    def __init__(self, case: Case) -> None:
        self.case = case
        self.loop = asyncio.get_running_loop()
        self.emulator: Emulator | None = None
        self.runs: Counter[int] = Counter()
        self.requests: Counter[int] = Counter(c.tag for c in case.calls)
        self.active = 0
        self.peak = 0
        self.notes: list[str] = []
        self.issued = Issued()
        self.released = threading.Event()
        self._lock = threading.Lock()
        self._entered = {c.tag: threading.Event() for c in case.calls}
        self._gates = {c.tag: Signal() for c in case.calls}

    def gate(self, tag: int) -> Signal:
        return self._gates[tag]

    def note(self, text: str) -> None:
        self.notes.append(text)

    def release(self) -> None:
        """Let every blocked thread and gated handler finish (the run is over)."""
        self.released.set()
        for gate in self._gates.values():
            gate.set()

    # -- the handlers ----------------------------------------------------------------------

    @contextmanager
    def running(self, tag: int) -> Iterator[None]:
        """Count one handler body for ``tag`` from its first line until it really returns."""
        with self._lock:
            self.runs[tag] += 1
            self.active += 1
            self.peak = max(self.peak, self.active)
        entered = self._entered.get(tag)
        if entered is not None:
            entered.set()
        try:
            yield
        finally:
            with self._lock:
                self.active -= 1

    async def behave(self, mode: str, tag: int) -> Any:
        if mode == "slow":
            await anyio.sleep(0.1)
        elif mode == "raise":
            raise ValueError(f"handler {tag} broke")
        elif mode == "tool_error":
            raise livebridge.ToolError(f"backend {tag} is down", retryable=True)
        elif mode == "hang":
            await anyio.sleep(3600)
        elif mode == "swallow":
            return await _swallow_cancellation(SWALLOW_SECONDS)
        elif mode == "huge":
            return "x" * HUGE_RESULT
        elif mode == "nan":
            return {"value": float("nan"), "tag": tag}
        elif mode == "set":
            return {tag, tag + 1}
        elif mode == "object":
            return object()
        return {"tag": tag, "done": True}

    def registry(self) -> livebridge.ToolRegistry:
        tools = livebridge.ToolRegistry()
        world = self

        @tools.tool(timeout=QUICK_TIMEOUT)
        async def act(mode: str, tag: int) -> Any:
            """Does one thing, in the way ``mode`` says."""
            with world.running(tag):
                return await world.behave(mode, tag)

        @tools.tool(timeout=QUICK_TIMEOUT)
        def act_sync(mode: str, tag: int) -> Any:
            """Does one thing in a worker thread."""
            with world.running(tag):
                if mode == "raise":
                    raise RuntimeError(f"sync handler {tag} broke")
                if mode == "block":
                    world.released.wait(BLOCK_SECONDS)
                return {"tag": tag, "done": True}

        @tools.tool(behavior="NON_BLOCKING", scheduling="WHEN_IDLE", timeout=QUICK_TIMEOUT)
        async def notify(mode: str, tag: int) -> Any:
            """Tells someone, without the model waiting."""
            with world.running(tag):
                return await world.behave(mode, tag)

        @tools.tool(behavior="NON_BLOCKING", scheduling="SILENT", timeout=QUICK_TIMEOUT)
        async def progress(mode: str, tag: int) -> AsyncIterator[dict[str, Any]]:
            """Reports progress step by step."""
            steps, pause = (3, 0.01) if mode == "stream" else (10, 0.15)
            with world.running(tag):
                for step in range(steps):
                    await anyio.sleep(pause)
                    yield {"tag": tag, "step": step}

        @tools.tool(timeout=HOLD_TIMEOUT)
        async def hold(tag: int) -> dict[str, Any]:
            """Waits until the other side lets it finish."""
            with world.running(tag):
                await world.gate(tag).wait()
                return {"tag": tag, "held": True}

        return tools

    # -- the server ------------------------------------------------------------------------

    async def scenario(self, conv: Conversation) -> None:
        """The model's side: one connection of the run (a resumed one just ends the script)."""
        if conv.resumed_from is not None:
            self.note(f"resumed connection {conv.session.id}")
            await conv.say(END)
            await _park()
            return
        case = self.case
        await conv.expect_turn()
        if case.handle_first:
            await conv.say("hello")
            await conv.turn_complete()
        ids = await self._issue_batch(conv)
        if case.twice:
            await self._deliver_again(conv, ids)
        done = await self._server_fault(conv, ids)
        if not done:
            await self._wait_answers(conv, [i for i in ids.values()], "the batch")
            await conv.say(END)
        await _park()

    async def _issue_batch(self, conv: Conversation) -> dict[int, str]:
        case = self.case
        specs = [(c.tool, c.args) for c in case.calls]
        if case.malformed is None:
            ids = dict(zip((c.tag for c in case.calls), await conv.tool_call(specs), strict=True))
        else:
            ids = await self._issue_with_malformed(conv, case.malformed)
        self.issued.ids.update(ids)
        self.note(f"toolCall {ids}")
        for call in case.calls:
            if call is not case.target or case.server not in _NEEDS_HOLD:
                self._gates[call.tag].set()  # only the fault's own call waits for the scenario
        return ids

    async def _issue_with_malformed(self, conv: Conversation, kind: str) -> dict[int, str]:
        """A raw ``toolCall``: the valid calls plus one malformed sibling in the middle."""
        session = conv.session
        await session.open_turn("model")
        ids = {c.tag: _call_id() for c in self.case.calls}
        specs = [(ids[c.tag], c.tool, c.args, session.is_blocking(c.tool)) for c in self.case.calls]
        calls = [{"id": i, "name": n, "args": a} for i, n, a, _ in specs]
        bad_id = _call_id()
        if kind == "args_not_object":
            bad: dict[str, Any] = {"id": bad_id, "name": "act", "args": ["ok", 99]}
            specs.append((bad_id, "act", {}, True))
        elif kind == "name_not_string":
            bad = {"id": bad_id, "name": 7, "args": {"mode": "ok", "tag": 99}}
            specs.append((bad_id, "7", {}, True))
        else:
            bad = {"id": 12345, "name": "act", "args": {"mode": "ok", "tag": 99}}
            bad_id = "12345"
        self.issued.malformed_id = bad_id
        calls.insert(len(calls) // 2, bad)
        session.checker.issue(specs)
        await session.send_raw(json.dumps({"toolCall": {"functionCalls": calls}}).encode())
        return ids

    async def _deliver_again(self, conv: Conversation, ids: dict[int, str]) -> None:
        """The same calls again inside ``modelTurn`` (as the service sometimes sends them)."""
        parts = [
            {"functionCall": {"id": ids[c.tag], "name": c.tool, "args": c.args}}
            for c in self.case.calls
        ]
        await conv.send({"serverContent": {"modelTurn": {"role": "model", "parts": parts}}})
        self.note("delivered the batch again in modelTurn")

    async def _server_fault(self, conv: Conversation, ids: dict[int, str]) -> bool:
        """Apply the case's server fault; True when the script is over on this connection."""
        fault = self.case.server
        target = self.case.target
        if fault in ("none", "repeat_after_ack"):
            if fault == "repeat_after_ack":
                await self._repeat_after_ack(conv, ids, target)
            return False
        if fault == "cancel_before":
            await conv.cancel([ids[target.tag]])
            return False
        await self._until_entered(target.tag)
        if fault.startswith("close_"):
            code = int(fault.removeprefix("close_"))
            if code == 1006:
                conv.session.abort()
            else:
                await conv.close(code, CLOSE_REASONS[code])
            return True
        if fault == "stale_handle":
            assert self.emulator is not None
            self.emulator.expire_handles()
            conv.session.abort()
            return True
        gate = self._gates[target.tag]
        if fault == "cancel_during":
            await conv.cancel([ids[target.tag]])
        elif fault == "cancel_at_settle":
            gate.set()
            await conv.cancel([ids[target.tag]])
        elif fault == "reissue_running":
            (again,) = await conv.session.issue_calls(
                "model", [(target.tool, target.args)], reissue_of=ids[target.tag]
            )
            self.note(f"re-issued {ids[target.tag]} as {again}")
            gate.set()
            await self._wait_answers(conv, [again], "the re-issue")
        elif fault == "interrupted":
            await conv.interrupted()
            gate.set()
        elif fault == "go_away":
            await conv.go_away("2s")
            gate.set()
            await self._wait_answers(conv, list(ids.values()), "the batch")
            await self._complete_turn(conv)
            return True
        return False

    async def _repeat_after_ack(
        self, conv: Conversation, ids: dict[int, str], target: CallPlan
    ) -> None:
        """Answer delivered and acknowledged, then the same call again: a new request."""
        await self._wait_answers(conv, list(ids.values()), "the batch")
        await conv.say("noted")
        if not await self._complete_turn(conv):
            return
        self.requests[target.tag] += 1
        (again,) = await conv.tool_call([(target.tool, target.args)])
        self.issued.repeat_id = again
        self.note(f"asked {target} again as {again} after its answer was acknowledged")
        await self._wait_answers(conv, [again], "the repeated request")

    async def _complete_turn(self, conv: Conversation) -> bool:
        try:
            async with asyncio.timeout(ANSWER_WAIT):
                await conv.turn_complete()
        except TimeoutError:
            self.note("scenario: the turn could not complete (a blocking call is unanswered)")
            return False
        return True

    async def _wait_answers(self, conv: Conversation, ids: list[str], what: str) -> None:
        try:
            await conv.wait_answers(ids, timeout=ANSWER_WAIT)
        except TimeoutError:
            self.note(f"scenario: {what} was not answered within {ANSWER_WAIT} s")

    async def _until_entered(self, tag: int) -> None:
        entered = self._entered[tag]
        if not await asyncio.to_thread(entered.wait, ANSWER_WAIT):
            self.note(f"scenario: handler #{tag} did not start within {ANSWER_WAIT} s")


async def _swallow_cancellation(limit: float) -> str:
    """Keeps running through every cancellation until ``limit`` seconds have passed."""
    deadline = time.monotonic() + limit
    while (left := deadline - time.monotonic()) > 0:
        try:
            await anyio.sleep(left)
        except anyio.get_cancelled_exc_class():
            continue
    return "finished late"


async def _park() -> None:
    """Keep the connection open until the client leaves (the server cancels the scenario)."""
    await asyncio.Event().wait()


def _call_id() -> str:
    return f"function-call-{random.getrandbits(64)}"
