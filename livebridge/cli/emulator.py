"""``livebridge emulator``: serve the emulator to any program, and give a verdict at the end.

It prints the environment lines that point a google-genai program (with ``--vendor openai``,
an ``openai`` program; ``--protocol`` is the old spelling) at it, each violation as it is
found, and a summary when it stops (SIGINT or SIGTERM); ``--report`` writes the transcript and the
violations as JSON, ``--strict`` makes any violation exit 1. What it keeps for the report is
bounded in bytes (``--report-mb``, the newest kept); the summary and ``--strict`` count every
violation. A bad flag or scenario is one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

import msgspec

from livebridge import profiles
from livebridge.cli.arguments import cannot_listen, port_number
from livebridge.cli.replay import add_replay_options
from livebridge.emulator.contract import HELD_ANSWERS_SECONDS, Violation
from livebridge.emulator.faults import Faults, MessagePredicate
from livebridge.emulator.scenario import Scenario
from livebridge.emulator.server import PROTOCOLS, Emulator
from livebridge.emulator.shared import STANDALONE_BYTES, Retention
from livebridge.emulator.steps import load_scenario
from livebridge.errors import UsageError
from livebridge.live.vendors import by_cli, by_model

_PROG = "livebridge emulator"
_FAULT_SECONDS = ("delay", "read_delay")


def add_emulator_command(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subcommands.add_parser(
        "emulator",
        help="serve the Live API emulator; prints the environment lines, violations and a verdict",
    )
    parser.add_argument("--port", default="0", help="port on 127.0.0.1 (default: any free)")
    parser.add_argument(
        "--vendor",
        "--protocol",  # the old spelling, still read
        dest="protocol",
        choices=PROTOCOLS,
        default="gemini",
        help="whose API is served: Gemini Live (default) or OpenAI (Realtime GA at /v1/realtime; "
        "with a gpt-live --model, GPT-Live at /v1/live/sessions); --protocol: the old spelling",
    )
    parser.add_argument(
        "--auto-response",
        action="store_true",
        help="openai: start the next response as soon as a batch's outputs are in",
    )
    parser.add_argument("--scenario", type=Path, help="JSON list of scenario steps")
    parser.add_argument(
        "--replay", type=Path, metavar="FILE", help="serve the server side of a session recording"
    )
    add_replay_options(parser)
    parser.add_argument("--report", type=Path, help="write transcript and violations here (JSON)")
    parser.add_argument("--strict", action="store_true", help="exit 1 if there were violations")
    parser.add_argument(
        "--report-mb",
        metavar="MIB",
        help=f"MiB of transcript, sessions and violations kept for the report, the newest "
        f"(default {STANDALONE_BYTES >> 20}); the summary counts every violation",
    )
    parser.add_argument(
        "--models", help="comma-separated model names served (default: any); others get 1008"
    )
    parser.add_argument(
        "--model",
        help="behave as this model on every connection, whatever the client's setup names "
        "(default: as the named model does; see livebridge.profiles)",
    )
    parser.add_argument(
        "--faults",
        help="comma-separated faults: delay=S, read_delay=S, drop=KEY, drop_client=KEY, "
        "abort_after_tool_call",
    )
    parser.add_argument(
        "--reissue-after", metavar="S", help="re-issue an unanswered BLOCKING call after S seconds"
    )
    parser.add_argument(
        "--reissue-next-turn",
        action="store_true",
        help="re-issue calls an interruption left unanswered when the next turn starts",
    )
    parser.add_argument(
        "--no-cancellation",
        action="store_true",
        help="barge-in drops the turn's calls without a toolCallCancellation",
    )
    parser.add_argument(
        "--held-answers",
        metavar="S",
        help=f"flag BLOCKING answers (openai: outputs) later than S seconds (default "
        f"{HELD_ANSWERS_SECONDS:g}; 'off' disables)",
    )
    parser.add_argument(
        "--no-audio-check",
        action="store_true",
        help="do not flag audio sent while a BLOCKING call is pending",
    )
    parser.set_defaults(command=run_emulator)


def run_emulator(args: argparse.Namespace) -> int:
    """Serve until SIGINT/SIGTERM; 0, or 1 under ``--strict`` with violations, or 2 on bad input."""
    try:
        emulator = _emulator(args)
        found = asyncio.run(_serve(emulator, args))
    except UsageError as error:  # a bad flag or file (ScenarioError too): one line
        print(f"{_PROG}: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before the signal handlers were in place: nothing served
        return 130
    return 1 if args.strict and found else 0


def parse_faults(text: str) -> Faults:
    """``delay=0.1,read_delay=0.05,drop=toolCall,drop_client=toolResponse,abort_after_tool_call``."""
    fields: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, has_value, value = item.partition("=")
        if name in _FAULT_SECONDS and has_value:
            fields[name] = _seconds(f"--faults {name}", value)
        elif name in ("drop", "drop_client") and value:
            fields[name] = _has_key(value)
        elif name == "abort_after_tool_call" and not has_value:
            fields[name] = True
        else:
            raise UsageError(
                f"--faults: cannot use {item!r}; expected delay=S, read_delay=S, drop=KEY, "
                "drop_client=KEY or abort_after_tool_call"
            )
    return Faults(**fields)


def _has_key(key: str) -> MessagePredicate:
    """A Gemini message with the top-level ``key``, or an OpenAI event of type ``key``."""
    return lambda message: key in message or message.get("type") == key


def _seconds(flag: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{flag} needs a number of seconds, got {text!r}") from None
    if not value >= 0:
        raise UsageError(f"{flag} needs a number of seconds ≥ 0, got {text!r}")
    return value


def _mebibytes(text: str | None) -> int:
    if text is None:
        return STANDALONE_BYTES
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"--report-mb needs a number of MiB, got {text!r}") from None
    if not 0 < value < 1 << 20:
        raise UsageError(f"--report-mb needs a number of MiB > 0, got {text!r}")
    return int(value * (1 << 20))


def _port(text: str) -> int:
    try:
        return port_number(text)
    except argparse.ArgumentTypeError as error:
        raise UsageError(f"--port: {error}") from None


def _emulator(args: argparse.Namespace) -> Emulator:
    protocol = args.protocol
    scenario: Scenario | None = load_scenario(args.scenario, protocol) if args.scenario else None
    if protocol == "openai":
        gemini_only = [
            flag
            for flag, given in (
                ("--reissue-after", args.reissue_after is not None),
                ("--reissue-next-turn", args.reissue_next_turn),
                ("--no-cancellation", args.no_cancellation),
                ("--no-audio-check", args.no_audio_check),
            )
            if given
        ]
        if gemini_only:
            raise UsageError(f"{', '.join(gemini_only)}: Gemini Live only, not --vendor openai")
    elif args.auto_response:
        raise UsageError("--auto-response: OpenAI Realtime only; add --vendor openai")
    if args.replay is not None and scenario is not None:
        raise UsageError("--replay and --scenario both script the model: give one")
    models = None
    if args.models is not None:
        models = [m.strip() for m in args.models.split(",") if m.strip()]
        if not models:
            raise UsageError("--models needs at least one model name")
    held: float | None = HELD_ANSWERS_SECONDS
    if args.held_answers == "off":
        held = None
    elif args.held_answers is not None:
        held = _seconds("--held-answers", args.held_answers)
    reissue = args.reissue_after
    if args.model is not None:
        # A model of its own protocol (gpt-live) picks its vendor whatever --vendor says.
        backend = (by_model(args.model) or by_cli(protocol)).backend
        if profiles.known_profile(args.model, backend) is None:
            known = ", ".join(profiles.families(backend))
            raise UsageError(f"--model {args.model!r} is not a model livebridge knows: {known}")
    if args.report is not None and not args.report.parent.is_dir():
        raise UsageError(f"--report: the folder {args.report.parent} does not exist")
    return Emulator(
        scenario,
        port=_port(args.port),
        faults=parse_faults(args.faults) if args.faults is not None else None,
        models=models,
        reissue_after=_seconds("--reissue-after", reissue) if reissue is not None else None,
        reissue_next_turn=args.reissue_next_turn,
        cancel_on_interrupt=not args.no_cancellation,
        check_audio_during_blocking=not args.no_audio_check,
        held_answers=held,
        on_violation=_print_violation,
        retention=Retention(max_bytes=_mebibytes(args.report_mb)),
        replay=args.replay,
        pace=args.pace,
        answer_timeout=args.answer_timeout,
        ignore_fields=args.ignore_fields,
        protocol=protocol,
        auto_response=args.auto_response,
        model=args.model,
    )


def _print_violation(violation: Violation) -> None:
    print(
        f"violation {violation.severity}: {violation.kind} [{violation.session}] "
        f"{violation.message}",
        flush=True,
    )


async def _serve(emulator: Emulator, args: argparse.Namespace) -> int:
    """Serve until a signal; the number of violations found."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await emulator.start()
    except OSError as error:
        raise UsageError(cannot_listen("--port", "127.0.0.1", emulator.port, error)) from None
    try:
        # One key variable: with both GEMINI_API_KEY and GOOGLE_API_KEY set, google-genai warns.
        env = emulator.env()
        for name, value in env.items():
            print(f"{name}={value}", flush=True)
        await stop.wait()
    finally:
        await emulator.stop()
    violations = list(emulator.violations)  # waits for the closed connections' verdicts
    counts = emulator.violation_counts
    _print_summary(emulator, counts)
    if args.report is not None:
        _write_report(args.report, emulator, violations)
    return sum(counts.values()) + len(_live_verdicts(emulator))


def _live_verdicts(emulator: Emulator) -> list[Any]:
    """GPT-Live: the peer faults each connection made, by name (``--strict`` counts them)."""
    live = emulator.live
    return [v for session in (live.sessions if live is not None else ()) for v in session.verdicts]


def _print_summary(emulator: Emulator, counts: dict[tuple[str, str], int]) -> None:
    total = sum(counts.values())
    errors = sum(n for (severity, _), n in counts.items() if severity == "error")
    print(
        f"summary: {emulator.connections_served} connection(s), {total} violation(s) "
        f"({errors} error(s), {total - errors} warning(s))",
        flush=True,
    )
    for (severity, kind), count in sorted(counts.items()):
        print(f"  {severity:<8}{kind:<28}{count}", flush=True)
    if emulator.transcript_dropped:  # the report keeps the newest within --report-mb
        print(
            f"  the report keeps the newest: {emulator.transcript_dropped} transcript "
            f"entries, {total - len(emulator.violations)} violation(s) dropped",
            flush=True,
        )
    if emulator.replay is not None:  # how the client's answers compare with the recording's
        print(emulator.replay.finish().render(), flush=True)
    faults = _live_verdicts(emulator)
    for verdict in faults:
        print(f"  verdict {verdict.case}: {verdict.detail}", flush=True)
    print("PASS: no violations" if not (total or faults) else "FAIL: the client broke the contract")


def _write_report(path: Path, emulator: Emulator, violations: list[Violation]) -> None:
    report = {
        "violations": violations,
        "transcript": emulator.transcript,
        "sessions": [
            {"id": s.id, "model": s.model, "close": s.close_info, "errors": s.errors}
            for s in emulator.connections
        ],
        "violation_counts": {
            f"{severity}:{kind}": n for (severity, kind), n in emulator.violation_counts.items()
        },
        "transcript_dropped": emulator.transcript_dropped,
    }
    try:
        path.write_bytes(msgspec.json.format(msgspec.json.encode(report)))
    except OSError as error:
        raise UsageError(f"cannot write the report to {path}: {error.strerror}") from None
