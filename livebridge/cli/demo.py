"""``livebridge demo``: run the scripted conversation of ``livebridge.demo`` from a terminal."""

from __future__ import annotations

import argparse
import importlib.util
import json
import signal
import sys
from typing import TextIO

from livebridge.cli.arguments import cannot_listen, port_number
from livebridge.demo import FAST_PACE

DESCRIPTION = """\
Run a scripted conversation of a voice travel agent against the built-in Live API emulator (no
key, no network): parallel calls with a failure and a timeout, a streamed booking, a barge-in
that cancels a running call, and a goAway followed by resumption on a new connection. Each turn's
calls are drawn as a timeline; the summary counts every call's fate. Exits 1 when any call did
not get exactly one answer.
"""


def add_demo_command(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subcommands.add_parser(
        "demo",
        help="run a scripted voice-agent conversation against the built-in emulator",
        description=DESCRIPTION,
    )
    parser.add_argument(
        "--json", action="store_true", help="print only the summary, as one JSON document"
    )
    parser.add_argument(
        "--metrics-port",
        type=port_number,
        default=0,
        metavar="N",
        help="serve Prometheus metrics on 127.0.0.1:N (default: any free port)",
    )
    parser.add_argument(
        "--hold",
        action="store_true",
        help="keep the metrics endpoint up after the conversation, until Ctrl-C",
    )
    parser.add_argument("--fast", action="store_true", help="shorten the tools' delays")
    parser.add_argument(
        "--vendor",
        choices=("gemini", "openai"),
        default="gemini",
        help="the Live API the emulator speaks and the session uses (same tools either way)",
    )
    parser.add_argument(
        "--phone",
        action="store_true",
        help="a whole phone call instead: a simulated caller, the Twilio bridge, the emulator",
    )
    parser.set_defaults(command=run_demo_command)


def run_demo_command(args: argparse.Namespace) -> int:
    """Run the demo; 0 when every call got exactly one answer and the emulator saw no violation."""
    import anyio
    from prometheus_client import CollectorRegistry

    from livebridge.demo.driver import Silent, run_demo
    from livebridge.demo.render import Terminal
    from livebridge.errors import DemoFailed
    from livebridge.observe.scrape import serve

    if args.phone:
        return run_phone_demo_command()
    from livebridge.cli.run import require_sdk
    from livebridge.errors import RunError

    try:
        require_sdk(args.vendor, None)
    except RunError as exc:
        print(f"livebridge demo: {exc}", file=sys.stderr)
        return 2
    terminal = None if args.json else Terminal(sys.stdout)
    pace = FAST_PACE if args.fast else 1.0
    registry = CollectorRegistry()
    try:
        endpoint = serve(args.metrics_port, registry=registry)
    except OSError as exc:
        listen = cannot_listen("--metrics-port", "127.0.0.1", args.metrics_port, exc)
        print(f"livebridge demo: {listen}", file=sys.stderr)
        return 2
    with endpoint:
        try:
            run = anyio.run(
                lambda: run_demo(
                    terminal or Silent(),
                    pace=pace,
                    registry=registry,
                    metrics_url=endpoint.url,
                    vendor=args.vendor,
                )
            )
        except DemoFailed as exc:
            print(f"livebridge demo: {exc}", file=sys.stderr)
            return 1
        except OSError as exc:
            print(f"livebridge demo: cannot start the emulator: {exc}", file=sys.stderr)
            return 2
        if terminal is None:
            print(json.dumps(run.summary, default=str), flush=True)
        else:
            terminal.summary(run.summary)
        if args.hold:
            hold(endpoint.url, endpoint.port, sys.stderr if args.json else sys.stdout)
    return 0 if run.ok else 1


def run_phone_demo_command() -> int:
    """``--phone``: 0 when the call ended with the goodbye heard."""
    import anyio

    missing = [n for n in ("soxr", "numpy") if importlib.util.find_spec(n) is None]
    if missing:
        print(
            f"livebridge demo: --phone needs {' and '.join(missing)}: "
            "pip install 'livebridge-voice[phone]'",
            file=sys.stderr,
        )
        return 2
    from livebridge.demo.phone import run_phone_demo

    try:
        return anyio.run(run_phone_demo)
    except OSError as exc:
        print(f"livebridge demo: cannot start the emulator: {exc}", file=sys.stderr)
        return 2


def scrape_config(port: int) -> str:
    """The ``scrape_configs`` entry of a ``prometheus.yml`` that scrapes the demo's endpoint."""
    return (
        "scrape_configs:\n"
        "  - job_name: livebridge-demo\n"
        "    scrape_interval: 5s\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{port}']}}]"
    )


def hold(url: str, port: int, stream: TextIO) -> None:
    """Keep the process (and so the metrics endpoint) alive until SIGINT or SIGTERM."""
    import anyio

    async def until_signalled() -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            # Said only once the signals are caught: an early Ctrl-C still ends it cleanly.
            print(
                f"\nmetrics stay up at {url} until Ctrl-C; for prometheus.yml:\n"
                f"{scrape_config(port)}",
                file=stream,
                flush=True,
            )
            async for _ in signals:
                return

    anyio.run(until_signalled)
