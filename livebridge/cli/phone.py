"""``livebridge phone MODULE:ATTR``: answer phone calls (Twilio Media Streams) with a Live model
that calls the tools of your registry.

Every failure is one line on standard error and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio

from livebridge.cli.arguments import port_number
from livebridge.cli.run import (
    DEFAULT_MODEL,
    RunError,
    add_serving_options,
    add_tool_sources,
    api_key,
    mcp_listed,
    parse_policy,
    registry_for,
)

__all__ = ["OPENAI_MODEL", "add_phone_command"]

OPENAI_MODEL = "gpt-realtime-2"

DESCRIPTION = """\
Answer phone calls with a Live model that calls the tools of your ToolRegistry (MODULE:ATTR, as
for `livebridge run`) and of each --mcp server. Serves Twilio Media Streams at
ws://HOST:PORT/twilio and the voice webhook at http://HOST:PORT/twiml (point the number's
webhook there, method GET): it answers
<Connect><Stream> to this server, then <Hangup/>. A tool named end_call hangs up once the caller
heard what was said before it. The model is reached with the vendor SDK's own environment
variables (GEMINI_API_KEY or GOOGLE_API_KEY, GOOGLE_GEMINI_BASE_URL; OPENAI_API_KEY,
OPENAI_BASE_URL); --emulator answers offline with the built-in emulator instead.

example:
  livebridge phone examples.embedded:tools --emulator --port 8080
"""


def add_phone_command(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subcommands.add_parser(
        "phone",
        help="answer Twilio phone calls with the tools of a ToolRegistry (MODULE:ATTR)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_tool_sources(parser)
    parser.add_argument("--vendor", choices=("gemini", "openai"), default="gemini")
    parser.add_argument(
        "--model",
        help=f"the Live model (default: {DEFAULT_MODEL}; with --vendor openai, {OPENAI_MODEL})",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=port_number, default=8080, help="0: any free port")
    parser.add_argument(
        "--public-url",
        metavar="URL",
        help="the address Twilio reaches this server at (default: the webhook request's Host)",
    )
    parser.add_argument(
        "--emulator", action="store_true", help="use the local emulator instead of the service"
    )
    parser.add_argument(
        "--dtmf-to-model", action="store_true", help="tell the model each key the caller presses"
    )
    add_serving_options(parser, "a CallPolicy setting (repeatable), as for `livebridge run`")
    parser.set_defaults(command=phone_command)


def phone_command(args: argparse.Namespace) -> int:
    """Serve calls until Ctrl-C or SIGTERM."""
    try:
        missing = [n for n in ("soxr", "numpy") if importlib.util.find_spec(n) is None]
        if missing:
            raise RunError(
                f"the phone bridge needs {' and '.join(missing)}: "
                "pip install 'livebridge-voice[phone]'"
            )
        if args.vendor == "openai" and importlib.util.find_spec("openai") is None:
            raise RunError(
                "--vendor openai needs the openai package: pip install 'livebridge-voice[openai]'"
            )
        registry = registry_for(args.target, args.mcp)
        policy = parse_policy(args.policy)
        if not args.emulator:
            _check_key(args.vendor)
        return anyio.run(_serve, args, registry, policy)
    except RunError as exc:
        print(f"livebridge phone: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _check_key(vendor: str) -> None:
    if vendor == "gemini":
        api_key()
    elif not os.environ.get("OPENAI_API_KEY"):
        raise RunError(
            "no API key: set OPENAI_API_KEY, or add --emulator to answer with the local emulator"
        )


async def _serve(args: argparse.Namespace, registry: Any, policy: Any) -> int:
    from prometheus_client import CollectorRegistry

    from livebridge.emulator import Emulator
    from livebridge.live.session import LiveSession
    from livebridge.observe.metrics import PrometheusObserver, serve
    from livebridge.observe.observers import Observer
    from livebridge.phone.bridge import OPENAI_PHONE_CONFIG, PhoneBridge, PhoneOptions
    from livebridge.phone.metrics import PhoneMetrics
    from livebridge.phone.server import serve_phone
    from livebridge.phone.twilio import StreamStarted

    openai = args.vendor == "openai"
    model = args.model or (OPENAI_MODEL if openai else DEFAULT_MODEL)
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(mcp_listed(registry))  # listed once, for every call
        observers: list[Observer] = []
        listeners: list[Any] = []
        if args.metrics_port is not None:
            collector = CollectorRegistry()
            observers.append(PrometheusObserver(collector, functions=registry.names()))
            listeners.append(PhoneMetrics(collector))
            try:
                endpoint = stack.enter_context(serve(args.metrics_port, registry=collector))
            except OSError as exc:
                raise RunError(
                    f"cannot serve metrics on 127.0.0.1:{args.metrics_port} "
                    f"({exc.strerror or exc}): pick another --metrics-port, or 0 for any free port"
                ) from None
            print(f"metrics: {endpoint.url}", flush=True)
        if args.emulator:
            emu = await stack.enter_async_context(
                Emulator(protocol="openai" if openai else "gemini")
            )
            client = emu.openai_client() if openai else emu.client()
        elif openai:
            from openai import AsyncOpenAI

            client = AsyncOpenAI()
        else:
            from google import genai

            client = genai.Client(api_key=api_key())
        config = (
            OPENAI_PHONE_CONFIG
            if openai
            else {"response_modalities": ["AUDIO"], "output_audio_transcription": {}}
        )

        @asynccontextmanager
        async def open_session(start: StreamStarted) -> AsyncIterator[LiveSession]:
            async with LiveSession.connect(
                client,
                model=model,
                tools=registry,
                config=config,
                policy=policy,
                observers=observers,
            ) as session:
                yield session

        options = PhoneOptions(dtmf_to_model=args.dtmf_to_model)
        bridge = PhoneBridge(open_session, options=options, listeners=listeners)
        try:
            server = await stack.enter_async_context(
                serve_phone(bridge, args.host, args.port, args.public_url)
            )
        except OSError as exc:
            raise RunError(
                f"cannot listen on {args.host}:{args.port} ({exc.strerror or exc}): "
                "pick another --port, or 0 for any free port"
            ) from None
        port = next(iter(server.sockets)).getsockname()[1]
        print(f"listening on ws://{args.host}:{port}/twilio", flush=True)
        print(f"voice webhook (GET): http://{args.host}:{port}/twiml", flush=True)
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                break
    return 0
