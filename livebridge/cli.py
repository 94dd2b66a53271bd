"""The ``livebridge`` command: one subcommand per feature, each defined next to its own code."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from livebridge.demo import add_demo_command
from livebridge.run import add_run_command

Command = Callable[[argparse.Namespace], int]


def add_emulator_command(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subcommands.add_parser(
        "emulator",
        help="serve the Live API emulator; prints the environment lines that point a program at it",
    )
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free)")
    parser.add_argument("--scenario", type=Path, help="JSON list of scenario steps")
    parser.set_defaults(command=run_emulator)


def run_emulator(args: argparse.Namespace) -> int:
    """Serve until interrupted, after printing ``KEY=VALUE`` lines for the environment."""
    from livebridge.emulator import Emulator, load_scenario

    scenario = load_scenario(args.scenario) if args.scenario else None

    async def serve() -> None:
        async with Emulator(scenario, port=args.port) as emulator:
            for name, value in emulator.env().items():
                print(f"{name}={value}", flush=True)
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, stop.set)
            await stop.wait()

    asyncio.run(serve())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="livebridge", description=__doc__)
    subcommands = parser.add_subparsers(dest="name", required=True)
    add_emulator_command(subcommands)
    add_demo_command(subcommands)
    add_run_command(subcommands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command: Command = args.command
    return command(args)


if __name__ == "__main__":
    sys.exit(main())
