"""The ``livebridge`` command: one subcommand per feature, each defined next to its own code."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from livebridge.demo import add_demo_command
from livebridge.emulator.command import add_emulator_command
from livebridge.run import add_run_command

Command = Callable[[argparse.Namespace], int]


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
