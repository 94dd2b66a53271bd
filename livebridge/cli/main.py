"""The ``livebridge`` command: one subcommand per feature, each defined next to its own code.

Every failure a user can cause ends as one line on standard error and exit status 2: argparse
errors through ``Parser.error``, the subcommands' own checks through their one-line messages.
Status 1 is kept for a contract the run found broken (a call without exactly one answer, an
emulator violation under ``--strict``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn, cast

Command = Callable[[argparse.Namespace], int]

DESCRIPTION = """\
Run Gemini Live and OpenAI Realtime sessions whose tool calls are each answered exactly once.

  livebridge demo                       a scripted conversation on the built-in emulator
  livebridge run myapp.tools:registry   your tools in a Live session (add --emulator: offline)
  livebridge phone myapp.tools:registry answer Twilio phone calls (add --emulator: offline)
  livebridge emulator                   serve the emulator for any program
  livebridge replay rec.jsonl app:tools  replay a recorded session to your tools, offline

Run `livebridge COMMAND --help` for a command's options.
"""


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line naming the command and the way to help."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    # Each subcommand module is imported only when the parser is built.
    from livebridge.cli.demo import add_demo_command
    from livebridge.cli.emulator import add_emulator_command
    from livebridge.cli.phone import add_phone_command
    from livebridge.cli.replay import add_replay_command
    from livebridge.cli.run import add_run_command

    parser = Parser(
        prog="livebridge",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # Subparsers are Parser instances too (argparse makes them of the parent's class).
    subcommands = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(dest="name", required=True, metavar="COMMAND"),
    )
    add_emulator_command(subcommands)
    add_demo_command(subcommands)
    add_run_command(subcommands)
    add_phone_command(subcommands)
    add_replay_command(subcommands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit status (130 after Ctrl-C)."""
    args = build_parser().parse_args(argv)
    command: Command = args.command
    try:
        return command(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
