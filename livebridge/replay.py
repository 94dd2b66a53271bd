"""Replay a recorded session's server side to an app's tools, and report where the app diverged.

``ReplayConnector`` hands a real ``LiveSession`` one ``Transport`` per recorded connection. Each
transport plays that connection's server messages in order (at the recorded pace, or as fast as
the app answers) and, wherever the recording shows the client answering tool calls, waits for
the app's own answers before going on. It compares them with the recording:

- ``unanswered``: a recorded answer the app never sent (within ``answer_timeout``);
- ``kind_changed``: an answer whose kind changed (``ok`` <-> ``error``);
- ``batch_split``: calls answered together in the recording, apart now (or the other way);
- ``slow``: an answer far slower than recorded (over ``slow_factor`` times, plus a second);
- ``unexpected_answer``: an answer to a call the recording never answered;
- ``handle_changed``: a reconnection that resumed another handle than the recorded one.

A connection the server closed ends with the recorded close code; one the client closed waits
for the app to leave it (after a ``goAway``, for instance) and the next opens with its handle.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from livebridge import wire
from livebridge.dispatch import CallPolicy
from livebridge.errors import LivebridgeError, RecordingError, TransportClosed
from livebridge.protocol import GeminiLiveProtocol, ProtocolOptions
from livebridge.record import Entry, Recording, read_recording, restore_audio
from livebridge.tools import ToolRegistry
from livebridge.transport import ClientItem, ToolAnswers

__all__ = [
    "Divergence",
    "DivergenceKind",
    "Pace",
    "ReplayConnector",
    "ReplayReport",
    "add_replay_command",
    "assert_replays",
    "replay",
    "replay_command",
]

Pace = Literal["recorded", "fast"]
DivergenceKind = Literal[
    "unanswered", "kind_changed", "batch_split", "slow", "unexpected_answer", "handle_changed"
]


@dataclass(frozen=True, slots=True)
class Divergence:
    """One way the replayed app answered differently from the recording."""

    kind: DivergenceKind
    line: int  # the recording's line of the entry it differs from; 0 when there is none
    call_id: str | None
    function: str | None
    detail: str

    def __str__(self) -> str:
        call = f" {self.function} ({self.call_id})" if self.call_id else ""
        where = f"line {self.line}" if self.line else "unrecorded"
        return f"{where}: {self.kind}{call}: {self.detail}"


@dataclass(slots=True)
class ReplayReport:
    """What a replay found: the divergences, and how many recorded answers were compared."""

    path: str
    answers: int = 0
    connections: int = 0
    divergences: list[Divergence] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.divergences

    def render(self) -> str:
        """The report as text: a summary line, then one line per divergence."""
        head = (
            f"{self.path}: {self.answers} answers on {self.connections} connection(s) replayed, "
            f"{len(self.divergences)} divergence(s)"
        )
        return "\n".join([head, *(f"  {d}" for d in self.divergences)])


@dataclass(slots=True)
class _Answer:
    message: int  # which toolResponse message of the replay carried it
    at: float
    kind: str
    detail: str


class ReplayConnector:
    """A ``Connector`` that serves a recording's connections one after another."""

    def __init__(
        self,
        recording: Recording,
        *,
        pace: Pace = "fast",
        answer_timeout: float = 10.0,
        slow_factor: float = 3.0,
        clock: Callable[[], float] = anyio.current_time,
    ) -> None:
        self.recording = recording
        self.report = ReplayReport(recording.path)
        self.finished = anyio.Event()
        self._connections = recording.connections()
        self._next = 0
        self._pace = pace
        self._answer_timeout = answer_timeout
        self._slow_factor = slow_factor
        self._clock = clock
        self._answers: dict[str, _Answer] = {}
        self._messages = 0
        self._changed = anyio.Event()
        self._delivered: dict[str, tuple[float, float, str]] = {}  # id: replay t, recorded t, name
        self._expected = {  # every call the recording answered, wherever it did
            str(response.get("id"))
            for entry in recording.entries
            if entry.ev == "send"
            for response in entry.data["msg"].get("toolResponse", {}).get("functionResponses", [])
        }

    def protocol(
        self, tools: ToolRegistry, options: ProtocolOptions, *, observed: bool
    ) -> GeminiLiveProtocol:
        return GeminiLiveProtocol(tools, options, observed=observed)

    @asynccontextmanager
    async def open(self, handle: str | None) -> AsyncIterator[_ReplayTransport]:
        if self._next >= len(self._connections):
            self.finished.set()
            raise TransportClosed(1000, "the recording has no further connection")
        entries = self._connections[self._next]
        self._next += 1
        self.report.connections += 1
        first = entries[0]
        if first.ev == "open":
            recorded = first.data.get("handle")
            if recorded != handle:
                self._diverge(
                    "handle_changed",
                    first,
                    None,
                    None,
                    f"resumed {handle!r}, recorded {recorded!r}",
                )
            entries = entries[1:]
        transport = _ReplayTransport(self, entries, first.data.get("session_id"))
        try:
            yield transport
        finally:
            if self.last_connection:
                self.finished.set()

    @property
    def last_connection(self) -> bool:
        """True once the recording's last connection was opened."""
        return self._next >= len(self._connections)

    # -- the app's answers ----------------------------------------------------------------------

    def answered(self, item: ClientItem) -> None:
        if not isinstance(item, ToolAnswers) or self.finished.is_set():
            return
        self._messages += 1
        now = self._clock()
        for response in item.responses:
            call_id = str(response.get("id"))
            body = response.get("response") or {}
            kind = "error" if isinstance(body, dict) and "error" in body else "ok"
            detail = json.dumps(body.get("error"))[:120] if kind == "error" else ""
            if call_id not in self._answers:
                self._answers[call_id] = _Answer(self._messages, now, kind, detail)
            if call_id not in self._expected:
                name = self._delivered.get(call_id, (0.0, 0.0, None))[2]
                self.report.divergences.append(
                    Divergence(
                        "unexpected_answer", 0, call_id, name, f"answered {kind}, recorded none"
                    )
                )
        self._changed.set()
        self._changed = anyio.Event()

    async def expect(self, entry: Entry) -> None:
        """Wait for the app's answers to the calls of one recorded ``toolResponse``, compare."""
        responses = entry.data["msg"].get("toolResponse", {}).get("functionResponses", [])
        ids = [str(r.get("id")) for r in responses]
        with anyio.move_on_after(self._answer_timeout):
            while not all(i in self._answers for i in ids):
                await self._changed.wait()
        self.report.answers += len(ids)
        messages = set()
        for response, call_id in zip(responses, ids, strict=True):
            name = response.get("name")
            body = response.get("response") or {}
            recorded = "error" if isinstance(body, dict) and "error" in body else "ok"
            answer = self._answers.get(call_id)
            if answer is None:
                self._diverge("unanswered", entry, call_id, name, f"recorded {recorded}")
                continue
            messages.add(answer.message)
            if answer.kind != recorded:
                extra = f" {answer.detail}" if answer.detail else ""
                text = f"answered {answer.kind}, recorded {recorded}{extra}"
                self._diverge("kind_changed", entry, call_id, name, text)
            delivered = self._delivered.get(call_id)
            if delivered is not None:
                took, recorded_took = answer.at - delivered[0], entry.t - delivered[1]
                if took > self._slow_factor * recorded_took + 1.0:
                    text = f"answered in {took:.2f} s, recorded {recorded_took:.2f} s"
                    self._diverge("slow", entry, call_id, name, text)
        together = [i for i, a in self._answers.items() if a.message in messages]
        if len(messages) > 1 or set(together) - set(ids):
            self._diverge(
                "batch_split",
                entry,
                None,
                None,
                f"recorded one answer for {', '.join(ids)}; replayed in "
                f"{len(messages)} message(s) with {', '.join(together)}",
            )

    def delivered(self, message: dict[str, Any], recorded_t: float) -> None:
        now = self._clock()
        for call in (message.get("toolCall") or {}).get("functionCalls") or []:
            self._delivered[str(call.get("id"))] = (now, recorded_t, call.get("name"))

    def _diverge(
        self,
        kind: DivergenceKind,
        entry: Entry,
        call_id: str | None,
        name: str | None,
        detail: str,
    ) -> None:
        self.report.divergences.append(Divergence(kind, entry.line, call_id, name, detail))


class _ReplayTransport:
    """One recorded connection, served to the session."""

    def __init__(self, replay: ReplayConnector, entries: list[Entry], session_id: Any) -> None:
        self.session_id = session_id if isinstance(session_id, str) else None
        self._replay = replay
        self._entries = entries
        self._index = 0
        self._last: tuple[float, float] | None = None  # replay time, recorded time

    async def recv(self) -> wire.ServerMessage:
        replay = self._replay
        while self._index < len(self._entries):
            entry = self._entries[self._index]
            self._index += 1
            if entry.ev == "send" and "toolResponse" in entry.data["msg"]:
                await replay.expect(entry)
            elif entry.ev == "recv":
                await self._keep_pace(entry)
                message = restore_audio(entry.data["msg"])
                replay.delivered(message, entry.t)
                return wire.decode_server(json.dumps(message))
            elif entry.ev == "close" and entry.data.get("by") == "server":
                raise TransportClosed(entry.data.get("code"), str(entry.data.get("reason", "")))
        if replay.last_connection:
            replay.finished.set()
        await anyio.sleep(math.inf)  # the client closes this connection
        raise AssertionError("unreachable")

    async def send(self, item: ClientItem) -> None:
        self._replay.answered(item)

    async def close(self) -> None:
        return None  # leaving the connector's ``open`` block ends the recorded connection

    async def _keep_pace(self, entry: Entry) -> None:
        now = self._replay._clock()
        if self._replay._pace == "recorded" and self._last is not None:
            await anyio.sleep(max(0.0, self._last[0] + (entry.t - self._last[1]) - now))
            now = self._replay._clock()
        self._last = (now, entry.t)


async def replay(
    recording: Recording | str,
    tools: ToolRegistry,
    *,
    pace: Pace = "fast",
    policy: CallPolicy | None = None,
    answer_timeout: float = 10.0,
    deadline: float = 300.0,
) -> ReplayReport:
    """Play ``recording`` to ``tools`` through a real ``LiveSession``; the divergences found."""
    from livebridge.session import LiveSession

    if isinstance(recording, str):
        recording = read_recording(recording)
    connector = ReplayConnector(recording, pace=pace, answer_timeout=answer_timeout)
    with anyio.fail_after(deadline):
        session_cm = LiveSession.connect(tools=tools, policy=policy, connector=connector)
        async with session_cm as session, anyio.create_task_group() as tg:
            tg.start_soon(_drain, session)
            await connector.finished.wait()
            tg.cancel_scope.cancel()
    return connector.report


async def _drain(session: Any) -> None:
    async for _ in session.events():
        pass


def assert_replays(
    recording: Recording | str, tools: ToolRegistry, *, pace: Pace = "fast"
) -> ReplayReport:
    """For tests: replay ``recording`` to ``tools``; ``AssertionError`` with the report if the
    app diverged. Call it from sync code; from async code await ``replay`` instead."""
    report = anyio.run(lambda: replay(recording, tools, pace=pace))
    if not report.ok:
        raise AssertionError(report.render())
    return report


# -- the command ----------------------------------------------------------------------------------

DESCRIPTION = """\
Play the server side of a session recording (SessionOptions(record=...)) to the tools of a
ToolRegistry through a real LiveSession, offline, and report where the answers differ from the
recorded ones: a call not answered, ok <-> error, a batch split differently, far slower than
recorded. Exits 0 without divergence, 1 with divergences, 2 on bad input.
"""


def add_replay_command(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subcommands.add_parser(
        "replay",
        help="replay a recorded session to your tools and report divergences",
        description=DESCRIPTION,
    )
    parser.add_argument("recording", metavar="FILE", help="a .jsonl or .jsonl.gz recording")
    parser.add_argument("target", metavar="MODULE:ATTR", help="e.g. myapp.tools:registry")
    parser.add_argument(
        "--pace",
        choices=["fast", "recorded"],
        default="fast",
        help="fast: as fast as the tools answer (default); recorded: the recording's timing",
    )
    parser.add_argument(
        "--answer-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds to wait for each recorded answer before calling it unanswered",
    )
    parser.set_defaults(command=replay_command)


def replay_command(args: argparse.Namespace) -> int:
    """Run the replay; 0 without divergence, 1 with, 2 on a bad recording or target."""
    from livebridge.run import RunError, load_registry

    try:
        recording = read_recording(args.recording)
        tools = load_registry(args.target)
        report = anyio.run(
            lambda: replay(recording, tools, pace=args.pace, answer_timeout=args.answer_timeout)
        )
    except (RecordingError, RunError) as exc:
        print(f"livebridge replay: {exc}", file=sys.stderr)
        return 2
    except (LivebridgeError, TimeoutError) as exc:
        print(f"livebridge replay: the replay failed: {exc}", file=sys.stderr)
        return 2
    print(report.render())
    return 0 if report.ok else 1
