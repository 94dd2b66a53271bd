"""``livebridge demo``: a scripted voice-agent conversation through a real ``LiveSession``.

It runs against the emulator in this process (no key, no network) and exercises the whole
contract: parallel calls with a failure and a timeout, a streamed NON_BLOCKING booking, a barge-in
that cancels a running call, and a ``goAway`` followed by resumption on a new connection.
"""

from __future__ import annotations

import argparse
import json
import sys

#: ``--fast`` runs the handlers' delays at this fraction of their normal length.
FAST_PACE = 0.2


def add_demo_command(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subcommands.add_parser(
        "demo", help="run a scripted voice-agent conversation against the built-in emulator"
    )
    parser.add_argument("--json", action="store_true", help="print only the summary, as JSON")
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=0,
        metavar="N",
        help="serve Prometheus metrics on 127.0.0.1:N while it runs (default: any free port)",
    )
    parser.add_argument("--fast", action="store_true", help="shorten the tools' delays")
    parser.set_defaults(command=run_demo_command)


def run_demo_command(args: argparse.Namespace) -> int:
    """Run the demo; 0 when every call got exactly one answer and the emulator saw no violation."""
    import anyio

    from livebridge.demo.driver import DemoFailed, Silent, run_demo
    from livebridge.demo.render import Terminal

    terminal = None if args.json else Terminal(sys.stdout)
    pace = FAST_PACE if args.fast else 1.0
    try:
        run = anyio.run(
            lambda: run_demo(terminal or Silent(), pace=pace, metrics_port=args.metrics_port)
        )
    except DemoFailed as exc:
        print(f"livebridge demo: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"livebridge demo: cannot serve metrics or the emulator: {exc}", file=sys.stderr)
        return 1
    if terminal is None:
        print(json.dumps(run.summary, indent=2, default=str))
    else:
        terminal.summary(run.summary)
    return 0 if run.ok else 1
