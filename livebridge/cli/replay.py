"""``livebridge replay FILE MODULE:ATTR``: a recording's answers checked against your tools."""

from __future__ import annotations

import argparse
import logging
import sys

import anyio

from livebridge.calls.tools import ToolRegistry
from livebridge.cli.run import load_registry
from livebridge.errors import LivebridgeError, RecordingError, RunError
from livebridge.recording.read import Recording, read_recording
from livebridge.recording.replay import replay
from livebridge.recording.report import MAX_GAP, MIN_ANSWER_TIMEOUT, ReplayReport

#: What the tools logged, shown after a report with divergences: at most this many lines.
KEPT_LOG_LINES = 50

DESCRIPTION = """\
Play the server side of a session recording (SessionOptions(record=...)) to the tools of a
ToolRegistry: a real LiveSession connects over TLS to the emulator in replay mode, offline.
Reports where the answers differ from the recorded ones: a call not answered, ok <-> error, a
value changed (--ignore-field for those that change from run to run), a batch split
differently, over 3x the recorded latency plus 1 s. Exits 0 without divergence, 1 with
divergences (then with what the tools logged), 2 on bad input.
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
    """``--pace``, ``--answer-timeout`` and ``--ignore-field``, shared with ``livebridge
    emulator --replay``."""
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
    parser.add_argument(
        "--ignore-field",
        action="append",
        default=[],
        dest="ignore_fields",
        metavar="FIELD",
        help="a field of the answers not compared (repeatable): a name, at any depth "
        "(timestamp), or a dotted path from the answer's root (booking.created_at)",
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

    async def run(recording: Recording, tools: ToolRegistry) -> ReplayReport:
        return await replay(
            recording,
            tools,
            pace=args.pace,
            answer_timeout=args.answer_timeout,
            ignore_fields=args.ignore_fields,
        )

    # What the tools logged (a tool's error, say) explains a divergence; on a replay that
    # matches the recording, a recorded error answered again is no news.
    logged = _Kept()
    logger = logging.getLogger("livebridge")
    logger.addHandler(logged)
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
        logger.removeHandler(logged)
    print(report.render())
    if report.ok:
        return 0
    for line in logged.lines:
        print(f"livebridge replay: the tools logged: {line}", file=sys.stderr)
    return 1


class _Kept(logging.Handler):
    """The first ``KEPT_LOG_LINES`` records, each as one line: its message and the exception's
    type and text, no traceback."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.lines) >= KEPT_LOG_LINES:
            return
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            text += f": {type(error).__name__}: {error}"
        self.lines.append(" ".join(text.split()))
