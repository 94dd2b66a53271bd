"""Replay a recorded session's server side to an app's tools, and report where the app diverged.

``replay(recording, tools)`` starts the emulator in replay mode (``Emulator(replay=...)``, see
``livebridge.emulator.gemini.replay``) and connects a real ``LiveSession`` to it over TLS, as
the app would connect to the service. The emulator plays each recorded connection's server messages
(at the recorded pace, or as fast as the app's answers allow), issues the recorded tool calls
under fresh ids with its contract checker following each, and compares the app's answers with
the recorded ones. The report talks about the recording: each divergence names its line and the
recorded call id.

- ``unanswered``: a recorded answer the app never sent (within the answer timeout, or because
  the session left the connection before the replay reached it);
- ``kind_changed``: an answer whose kind changed (``ok`` <-> ``error``);
- ``batch_split``: calls answered together in the recording, apart now (or the other way);
- ``slow``: an answer over ``SLOW_FACTOR`` times the recorded latency plus ``SLOW_MARGIN``;
- ``unexpected_answer``: an answer to a call the recording never answered, or a second answer;
- ``handle_changed``: a reconnection that resumed another handle than the recorded one;
- ``connection_missing``: a recorded connection the app never opened (it did not reconnect).

A recording is read streamed and bounded, each field's type checked (``livebridge.recording.read``):
a bad one is a one-line ``RecordingError`` and exit 2 from ``livebridge replay``. At the
recorded pace a gap between entries longer than ``MAX_GAP`` seconds is played as ``MAX_GAP``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Literal

import anyio
from google.genai import types

from livebridge.calls.dispatch import CallPolicy
from livebridge.calls.tools import ToolRegistry
from livebridge.errors import LivebridgeError, RecordingError
from livebridge.recording.record import Recording, read_recording

__all__ = [
    "MAX_GAP",
    "MIN_ANSWER_TIMEOUT",
    "REPLAY_MODEL",
    "SLOW_FACTOR",
    "SLOW_MARGIN",
    "Divergence",
    "DivergenceKind",
    "Pace",
    "ReplayReport",
    "add_replay_command",
    "assert_replays",
    "default_answer_timeout",
    "replay",
    "replay_command",
]

Pace = Literal["recorded", "fast"]
DivergenceKind = Literal[
    "unanswered",
    "kind_changed",
    "batch_split",
    "slow",
    "unexpected_answer",
    "handle_changed",
    "connection_missing",
]

#: An answer is ``slow`` past SLOW_FACTOR x its recorded latency + SLOW_MARGIN seconds.
SLOW_FACTOR = 3.0
SLOW_MARGIN = 1.0
#: The default answer timeout is 10x the slowest recorded answer, and never under this.
MIN_ANSWER_TIMEOUT = 5.0
#: With ``pace="recorded"``, a gap between two entries longer than this (seconds) is played
#: as this: no recording holds a replay idle for longer.
MAX_GAP = 30.0
#: The model name the replaying session asks for (the emulator serves any).
REPLAY_MODEL = "gemini-live-replay"


@dataclass(frozen=True, slots=True)
class Divergence:
    """One way the replayed app answered differently from the recording."""

    kind: DivergenceKind
    line: int  # the recording's line of the entry it differs from
    call_id: str | None  # the recorded call id
    function: str | None
    detail: str

    def __str__(self) -> str:
        call = f" {self.function} ({self.call_id})" if self.call_id else ""
        return f"line {self.line}: {self.kind}{call}: {self.detail}"


@dataclass(slots=True)
class ReplayReport:
    """What a replay found: the divergences, and how many recorded answers were compared."""

    path: str
    answers: int = 0
    connections: int = 0
    recorded_connections: int = 0
    divergences: list[Divergence] = field(default_factory=list)
    #: The line of the recording's ``truncated`` entry (it hit its size bound), else None.
    truncated_at: int | None = None

    @property
    def ok(self) -> bool:
        return not self.divergences

    def render(self) -> str:
        """The report as text: a summary line, then one line per divergence."""
        lines = [
            f"{self.path}: {self.answers} answers on {self.connections} of "
            f"{self.recorded_connections} connection(s) replayed, "
            f"{len(self.divergences)} divergence(s)"
        ]
        if self.truncated_at is not None:
            lines.append(
                f"  note: the recording was cut at line {self.truncated_at} (it reached "
                "record_max_bytes); only what it holds was replayed"
            )
        lines += [f"  {d}" for d in self.divergences]
        return "\n".join(lines)


def default_answer_timeout(recording: Recording) -> float:
    """How long to wait for each answer: 10x the slowest recorded one, at least 5 s."""
    issued: dict[str, float] = {}
    slowest = 0.0
    for entry in recording.entries:
        message = entry.data.get("msg") or {}
        if entry.ev == "recv":
            for call in (message.get("toolCall") or {}).get("functionCalls") or []:
                issued[str(call.get("id"))] = entry.t
        elif entry.ev == "send":
            for answer in (message.get("toolResponse") or {}).get("functionResponses") or []:
                at = issued.get(str(answer.get("id")))
                if at is not None:
                    slowest = max(slowest, entry.t - at)
    return max(MIN_ANSWER_TIMEOUT, 10 * slowest)


async def replay(
    recording: Recording | str | os.PathLike[str],
    tools: ToolRegistry,
    *,
    pace: Pace = "fast",
    policy: CallPolicy | None = None,
    answer_timeout: float | None = None,
    config: types.LiveConnectConfigOrDict | None = None,
    deadline: float = 300.0,
) -> ReplayReport:
    """Play ``recording`` to ``tools`` through a real ``LiveSession`` on the emulator in replay
    mode; the report of what diverged. ``answer_timeout``: see ``default_answer_timeout``.
    After ``deadline`` seconds the replay stops and what it did not reach is reported."""
    from livebridge import profiles
    from livebridge.emulator import Emulator
    from livebridge.live.session import LiveSession, SessionOptions

    if not isinstance(recording, Recording):
        recording = read_recording(recording)
    emulator = Emulator(replay=recording, pace=pace, answer_timeout=answer_timeout)
    player = emulator.replay
    assert player is not None
    config = config or types.LiveConnectConfig(response_modalities=[types.Modality.AUDIO])
    async with emulator:
        session_cm = LiveSession.connect(
            emulator.client(),
            model=REPLAY_MODEL,
            tools=tools,
            config=config,
            policy=policy,
            # A recording does not say its model: the Developer API's documented defaults.
            options=SessionOptions(profile=profiles.DEVELOPER_DEFAULT),
        )
        async with session_cm as session, anyio.create_task_group() as tg:

            async def drain() -> None:  # a session that ends stops the replay early
                async for _ in session.events():
                    pass
                tg.cancel_scope.cancel()

            tg.start_soon(drain)
            with contextlib.suppress(TimeoutError):  # what was not reached is reported
                await emulator.wait_for(lambda: player.done, timeout=deadline)
            tg.cancel_scope.cancel()
        with contextlib.suppress(TimeoutError):
            await emulator.settled()
    return player.finish()


def assert_replays(
    recording: Recording | str | os.PathLike[str],
    tools: ToolRegistry,
    *,
    pace: Pace = "fast",
    answer_timeout: float | None = None,
) -> ReplayReport:
    """For tests: ``replay`` from sync code (the CLI's path); ``AssertionError`` with the
    report if the app diverged. From async code, ``await replay(...)`` instead."""

    async def run() -> ReplayReport:
        return await replay(recording, tools, pace=pace, answer_timeout=answer_timeout)

    report = anyio.run(run)
    if not report.ok:
        raise AssertionError(report.render())
    return report


# -- the command ----------------------------------------------------------------------------------

DESCRIPTION = """\
Play the server side of a session recording (SessionOptions(record=...)) to the tools of a
ToolRegistry: a real LiveSession connects over TLS to the emulator in replay mode, offline.
Reports where the answers differ from the recorded ones: a call not answered, ok <-> error, a
batch split differently, over 3x the recorded latency plus 1 s. Exits 0 without divergence, 1
with divergences, 2 on bad input.
"""


def add_replay_command(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subcommands.add_parser(
        "replay",
        help="replay a recorded session to your tools and report divergences",
        description=DESCRIPTION,
    )
    parser.add_argument("recording", metavar="FILE", help="a .jsonl or .jsonl.gz recording")
    parser.add_argument("target", metavar="MODULE:ATTR", help="e.g. myapp.tools:registry")
    add_replay_options(parser)
    parser.set_defaults(command=replay_command)


def add_replay_options(parser: argparse.ArgumentParser) -> None:
    """``--pace`` and ``--answer-timeout``, shared with ``livebridge emulator --replay``."""
    parser.add_argument(
        "--pace",
        choices=["fast", "recorded"],
        default="fast",
        help="fast: server frames as soon as the client's answers allow (default); "
        f"recorded: at the recording's relative times (a gap over {MAX_GAP:g} s is played as "
        f"{MAX_GAP:g} s)",
    )
    parser.add_argument(
        "--answer-timeout",
        type=_seconds,
        metavar="S",
        help="seconds to wait for each recorded answer before calling it unanswered "
        f"(default: 10x the slowest recorded answer, at least {MIN_ANSWER_TIMEOUT:g})",
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return value


def replay_command(args: argparse.Namespace) -> int:
    """Run the replay; 0 without divergence, 1 with, 2 on a bad recording or target."""
    from livebridge.cli.run import RunError, load_registry

    async def run(recording: Recording, tools: ToolRegistry) -> ReplayReport:
        return await replay(recording, tools, pace=args.pace, answer_timeout=args.answer_timeout)

    handler = logging.StreamHandler(sys.stderr)  # the app's tool errors: one line each
    handler.setFormatter(_OneLine())
    logger = logging.getLogger("livebridge")
    logger.addHandler(handler)
    try:
        recording = read_recording(args.recording)
        tools = load_registry(args.target)
        report = anyio.run(run, recording, tools)
    except (RecordingError, RunError) as exc:
        print(f"livebridge replay: {exc}", file=sys.stderr)
        return 2
    except LivebridgeError as exc:
        print(f"livebridge replay: the replay failed: {exc}", file=sys.stderr)
        return 2
    finally:
        logger.removeHandler(handler)
    print(report.render())
    return 0 if report.ok else 1


class _OneLine(logging.Formatter):
    """A log record as one line: its message and the exception's type and text, no traceback."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            text += f": {type(error).__name__}: {error}"
        return f"livebridge replay: {record.levelname.lower()}: {text}"
