"""``livebridge phone MODULE:ATTR``: answer phone calls (Twilio Media Streams) with a Live model
that calls the tools of your registry.

Every failure is one line on standard error and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import signal
import sys
from contextlib import AsyncExitStack
from typing import Any

import anyio

from livebridge.cli.arguments import cannot_listen, port_number
from livebridge.cli.run import (
    DEFAULT_MODEL,
    OPENAI_MODEL,
    VENDORS,
    add_serving_options,
    add_tool_sources,
    api_key,
    load_object,
    mcp_listed,
    parse_policy,
    registry_for,
    require_sdk,
    require_tools,
)
from livebridge.errors import RunError

#: The most an ``--instructions @FILE`` may hold.
MAX_INSTRUCTIONS = 256 * 1024

DEFAULT_MAX_CALLS = 20

DESCRIPTION = """\
Answer phone calls with a Live model that calls the tools of your ToolRegistry (MODULE:ATTR, as
for `livebridge run`) and of each --mcp server, or with the agent of each call: MODULE:ATTR may
name a livebridge.phone.PhoneAgent or a function agent(call) -> PhoneAgent given the
IncomingCall. Serves Twilio Media Streams at ws://HOST:PORT/twilio and the voice webhook at
http://HOST:PORT/twiml (point the number's webhook at PUBLIC-URL/twiml, POST or GET): it answers
<Connect><Stream> to this server, then <Hangup/>. A tool named end_call hangs up once the caller
heard what was said before it. Every request must carry Twilio's signature made with
TWILIO_AUTH_TOKEN (without it the command refuses to start, unless --no-signature-check: for
offline and local testing only). The model is reached with the vendor SDK's own environment
variables (GEMINI_API_KEY or GOOGLE_API_KEY, GOOGLE_GEMINI_BASE_URL; OPENAI_API_KEY,
OPENAI_BASE_URL); --emulator answers offline with the built-in emulator instead.

example:
  TWILIO_AUTH_TOKEN=... livebridge phone myapp.tools:registry --public-url https://agent.example.com
  livebridge phone examples.embedded:tools --emulator --no-signature-check --port 8080
  livebridge phone myapp.tools:registry --instructions @persona.txt --voice Kore ...
"""


def call_count(text: str) -> int:
    """An argparse ``type`` for --max-calls: a whole number, 1 or more."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of calls") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"{count} calls: allow at least 1")
    return count


def add_phone_command(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subcommands.add_parser(
        "phone",
        help="answer Twilio phone calls with the tools of a ToolRegistry (MODULE:ATTR)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_tool_sources(parser, "a ToolRegistry, a PhoneAgent or a function agent(call) -> PhoneAgent")
    parser.add_argument(
        "--instructions",
        metavar="TEXT",
        help="the model's system instructions, or @FILE to read them from a file (an agent's "
        "own instructions win)",
    )
    parser.add_argument(
        "--voice", metavar="NAME", help="the model's voice (e.g. Kore on Gemini, marin on OpenAI)"
    )
    parser.add_argument(
        "--vendor", choices=VENDORS, default="gemini", help="whose Live API (default: gemini)"
    )
    parser.add_argument(
        "--provider",
        choices=("twilio", "telnyx"),
        default="twilio",
        help="the phone provider: twilio (/twiml and /twilio, TWILIO_AUTH_TOKEN) or telnyx "
        "(/texml and /telnyx, TELNYX_PUBLIC_KEY)",
    )
    parser.add_argument(
        "--model",
        help=f"the Live model (default: {DEFAULT_MODEL}; with --vendor openai, {OPENAI_MODEL}; "
        "gpt-live-1.1 speaks GPT-Live, in the call's μ-law as is)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=port_number, default=8080, help="0: any free port")
    parser.add_argument(
        "--public-url",
        metavar="URL",
        help="the https:// address Twilio reaches this server at, and the URL it signs "
        "(default: https:// and the request's Host)",
    )
    parser.add_argument(
        "--no-signature-check",
        action="store_true",
        help="serve without TWILIO_AUTH_TOKEN, checking no signature (offline and local tests)",
    )
    parser.add_argument(
        "--max-calls",
        type=call_count,
        default=DEFAULT_MAX_CALLS,
        metavar="N",
        help=f"calls at once, at most; past it a call is rejected busy (default: "
        f"{DEFAULT_MAX_CALLS})",
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
        require_sdk(args.vendor, args.model)
        # An agent is a registry, a PhoneAgent or a function; --mcp adds to a registry.
        registry = (
            _load_agent(args.target)
            if args.target is not None and not args.mcp
            else registry_for(args.target, args.mcp)
        )
        args.instructions = _instructions(args.instructions)
        policy = parse_policy(args.policy)
        if not args.emulator:
            _check_key(args.vendor)
        _check_public_url(args.public_url)
        token = _auth_token(args.no_signature_check, args.provider)
        _log_calls()
        return anyio.run(_serve, args, registry, policy, token)
    except RunError as exc:
        print(f"livebridge phone: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _load_agent(target: str) -> Any:
    from livebridge.calls.tools import ToolRegistry
    from livebridge.phone.agent import PhoneAgent

    value = load_object(target)
    if isinstance(value, ToolRegistry):
        return require_tools(value, target)
    if isinstance(value, PhoneAgent) or (callable(value) and not isinstance(value, type)):
        return value
    raise RunError(
        f"{target} is of type {type(value).__name__}: point at a livebridge.ToolRegistry, a "
        "livebridge.phone.PhoneAgent or a function agent(call) -> PhoneAgent"
    )


def _instructions(text: str | None) -> str | None:
    """``--instructions``: the text, or the file's after ``@``."""
    if text is None or not text.startswith("@"):
        return text
    path = text[1:]
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_INSTRUCTIONS + 1)
    except OSError as exc:
        raise RunError(f"cannot read --instructions {path!r}: {exc.strerror or exc}") from None
    if len(data) > MAX_INSTRUCTIONS:
        raise RunError(f"--instructions {path!r} is over {MAX_INSTRUCTIONS // 1024} KiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise RunError(f"--instructions {path!r} is not UTF-8 text") from None


def _log_calls() -> None:
    """Each call's two lines (its start, its end) and the bridge's warnings, on stderr."""
    logger = logging.getLogger("livebridge.phone")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s livebridge phone: %(message)s"))
    logger.addHandler(handler)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)


def _check_key(vendor: str) -> None:
    api_key(vendor)


def _check_public_url(url: str | None) -> None:
    from livebridge.errors import UsageError
    from livebridge.phone.gate import public_base

    if url is None:
        return
    try:
        public_base(url)
    except UsageError:
        raise RunError(
            f"--public-url must be https://HOST[:PORT][/PATH] (Twilio streams to wss:// only), "
            f"not {url!r}"
        ) from None


def _auth_token(unchecked: bool, provider: str = "twilio") -> str | None:
    """The token signatures are checked with (Telnyx: its public key); None with
    --no-signature-check."""
    if unchecked:
        return None
    if provider == "telnyx":
        from livebridge.errors import UsageError
        from livebridge.phone.telnyx import public_key

        key = os.environ.get("TELNYX_PUBLIC_KEY", "").strip()
        if not key:
            raise RunError(
                "no TELNYX_PUBLIC_KEY: set it so that only Telnyx's signed webhooks open calls, "
                "or add --no-signature-check for offline and local testing"
            )
        try:
            public_key(key)
        except UsageError as exc:
            raise RunError(f"TELNYX_PUBLIC_KEY: {exc}") from None
        return key
    token = os.environ.get("TWILIO_AUTH_TOKEN", "").strip()
    if not token:
        raise RunError(
            "no TWILIO_AUTH_TOKEN: set it so that only Twilio's signed requests open calls, "
            "or add --no-signature-check for offline and local testing"
        )
    return token


async def _serve(args: argparse.Namespace, registry: Any, policy: Any, token: str | None) -> int:
    from prometheus_client import CollectorRegistry

    from livebridge.calls.observers import Observer
    from livebridge.calls.tools import ToolRegistry
    from livebridge.emulator import Emulator
    from livebridge.live.vendors import by_cli
    from livebridge.observe.metrics import PrometheusObserver
    from livebridge.observe.scrape import serve
    from livebridge.phone.agent import PhoneAgent, session_opener
    from livebridge.phone.bridge import PhoneBridge, PhoneOptions
    from livebridge.phone.gate import STREAM_PATH, TELNYX_PATH, TEXML_PATH, TWIML_PATH
    from livebridge.phone.metrics import PhoneMetrics
    from livebridge.phone.server import serve_phone
    from livebridge.phone.telnyx import TelnyxStream
    from livebridge.phone.twilio import TwilioStream

    vendor = by_cli(args.vendor, args.model)
    model = args.model or vendor.default_model
    async with AsyncExitStack() as stack:
        if isinstance(registry, ToolRegistry):  # listed once, for every call
            await stack.enter_async_context(mcp_listed(registry))
        observers: list[Observer] = []
        listeners: list[Any] = []
        if args.metrics_port is not None:
            collector = CollectorRegistry()
            tools = registry.tools if isinstance(registry, PhoneAgent) else registry
            names = tools.names() if isinstance(tools, ToolRegistry) else None
            observers.append(PrometheusObserver(collector, functions=names))
            listeners.append(PhoneMetrics(collector))
            try:
                endpoint = stack.enter_context(serve(args.metrics_port, registry=collector))
            except OSError as exc:
                raise RunError(
                    cannot_listen("--metrics-port", "127.0.0.1", args.metrics_port, exc)
                ) from None
            print(f"metrics: {endpoint.url}", flush=True)
        if args.emulator:
            emu = await stack.enter_async_context(Emulator(**vendor.emulator_options(model)))
            client = getattr(emu, vendor.emulator_client)()
        else:  # the key from the environment, as each SDK reads it by itself
            key = api_key(args.vendor)
            client = vendor.new_client(api_key=key)
        open_session = session_opener(
            registry,
            client,
            observers=observers,
            model=model,
            instructions=args.instructions,
            voice=args.voice,
            policy=policy,
        )
        options = PhoneOptions(dtmf_to_model=args.dtmf_to_model)
        telnyx = args.provider == "telnyx"
        codec = TelnyxStream if telnyx else TwilioStream
        bridge = PhoneBridge(open_session, options=options, listeners=listeners, codec=codec)
        try:
            server = await stack.enter_async_context(
                serve_phone(
                    bridge,
                    args.host,
                    args.port,
                    args.public_url,
                    auth_token=None if telnyx else token,
                    max_calls=args.max_calls,
                    provider=args.provider,
                    telnyx_public_key=token if telnyx else None,
                )
            )
        except OSError as exc:
            raise RunError(cannot_listen("--port", args.host, args.port, exc)) from None
        port = server.port
        stream, hook = (TELNYX_PATH, TEXML_PATH) if telnyx else (STREAM_PATH, TWIML_PATH)
        print(f"listening on ws://{args.host}:{port}{stream}", flush=True)
        print(f"voice webhook (POST or GET): http://{args.host}:{port}{hook}", flush=True)
        if token is None:
            print("signatures: not checked (--no-signature-check): for local testing only")
        else:
            print(
                f"signatures: checked with {'TELNYX_PUBLIC_KEY' if telnyx else 'TWILIO_AUTH_TOKEN'}"
            )
        print(f"calls at once: at most {args.max_calls}", flush=True)
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                break
    return 0
