"""``livebridge run MODULE:ATTR``: talk to a Live model that calls the tools of your registry.

Every failure is one line on standard error saying what to do, and a non-zero exit.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import os
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing, asynccontextmanager
from typing import Any

import anyio
from prometheus_client import CollectorRegistry
from websockets.exceptions import InvalidStatus, WebSocketException

from livebridge.calls.observers import Observer
from livebridge.calls.policy import CallPolicy
from livebridge.calls.tools import ToolRegistry
from livebridge.cli.arguments import cannot_listen, port_number
from livebridge.emulator import Emulator
from livebridge.errors import (
    ConnectionLostError,
    LiveSessionError,
    MCPError,
    ModelNotFoundError,
    RunError,
    SessionEndedError,
)
from livebridge.live.session import LiveSession
from livebridge.live.vendors import by_cli
from livebridge.observe.metrics import PrometheusObserver
from livebridge.observe.scrape import serve
from livebridge.protocol.events import (
    Closed,
    OutputTranscript,
    TextOut,
    ToolCallSettled,
    ToolCallStarted,
    TurnComplete,
)
from livebridge.protocol.vendor import Vendor
from livebridge.vendors import DESCRIPTORS

DEFAULT_MODEL = by_cli("gemini").default_model
OPENAI_MODEL = by_cli("openai").default_model
#: What ``--vendor`` takes: each vendor descriptor's command-line name, once.
VENDORS = tuple(dict.fromkeys(vendor.cli for vendor in DESCRIPTORS))
KEY_VARIABLES = by_cli("gemini").key_variables


DESCRIPTION = """\
Talk to a Live model that calls the tools of your ToolRegistry.

Like `uvicorn app:app`, MODULE is a dotted module name imported with the current directory first
on the path (myapp.tools, not myapp/tools.py), and ATTR names the ToolRegistry in it. Text turns
come from --text or, one per line, from standard input; the model's replies and each tool call are
printed as they happen. The key comes from GEMINI_API_KEY (or GOOGLE_API_KEY), with --vendor
openai from OPENAI_API_KEY; --emulator runs offline against the built-in emulator instead. Each
--mcp adds the tools of an MCP server: a command line run over stdio, or an http(s):// URL
(streamable HTTP); with --mcp, MODULE:ATTR may be left out.

examples:
  livebridge run examples.embedded:tools --emulator --text "Weather in Paris?"
  livebridge run examples.embedded:tools --vendor openai --emulator --text "Weather in Paris?"
  livebridge run --mcp "python -m weather_server" --mcp https://kb.example.com/mcp
"""


def add_run_command(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subcommands.add_parser(
        "run",
        help="run the tools of a ToolRegistry (MODULE:ATTR) in a Live session",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_tool_sources(parser)
    parser.add_argument(
        "--emulator", action="store_true", help="use the local emulator instead of the service"
    )
    parser.add_argument(
        "--text",
        action="append",
        default=[],
        metavar="T",
        help="a user turn (repeatable); without it, one turn per line of standard input",
    )
    parser.add_argument(
        "--vendor", choices=VENDORS, default="gemini", help="whose Live API (default: gemini)"
    )
    parser.add_argument(
        "--model",
        help=f"the Live model (default: {DEFAULT_MODEL}; with --vendor openai, {OPENAI_MODEL})",
    )
    add_serving_options(parser, f"a CallPolicy setting (repeatable): {', '.join(policy_fields())}")
    parser.set_defaults(command=run_command)


def add_tool_sources(
    parser: argparse.ArgumentParser, target_help: str = "e.g. myapp.tools:registry"
) -> None:
    """``MODULE:ATTR`` and ``--mcp``, where each command running the app's tools finds them."""
    parser.add_argument(
        "target", metavar="MODULE:ATTR", nargs="?", help=f"{target_help} (optional with --mcp)"
    )
    parser.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="SERVER",
        help='an MCP server whose tools to add (repeatable): a command line ("python -m '
        'server") or an http(s):// URL',
    )


def add_serving_options(parser: argparse.ArgumentParser, policy_help: str) -> None:
    """``--metrics-port`` and ``--policy``, as each command running the app's tools takes them."""
    parser.add_argument(
        "--metrics-port",
        type=port_number,
        metavar="N",
        help="serve Prometheus metrics on 127.0.0.1:N (0: any free port)",
    )
    parser.add_argument(
        "--policy", action="append", default=[], metavar="KEY=VALUE", help=policy_help
    )


def run_command(args: argparse.Namespace) -> int:
    """Run the session; 0 when it ended normally."""
    try:
        registry = registry_for(args.target, args.mcp)
        policy = parse_policy(args.policy)
        vendor = require_sdk(args.vendor, args.model)
        args.model = args.model or vendor.default_model
        key = None if args.emulator else api_key(args.vendor)
        return anyio.run(_run, args, registry, policy, key)
    except RunError as exc:
        print(f"livebridge run: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


# -- checking the command line ---------------------------------------------------------------


def load_registry(target: str, *, empty_ok: bool = False) -> ToolRegistry:
    """Import ``MODULE`` and return its ``ATTR``, a ``ToolRegistry`` with tools (``empty_ok``: or
    without, when they come from elsewhere)."""
    value = load_object(target)
    if not isinstance(value, ToolRegistry):
        raise RunError(
            f"{target} is of type {type(value).__name__}, not a livebridge.ToolRegistry: "
            "point at the registry your tools are registered on"
        )
    return value if empty_ok else require_tools(value, target)


def require_tools(registry: ToolRegistry, target: str) -> ToolRegistry:
    """``registry``, unless it has no tools: a model given none is never what was meant."""
    if not registry.names():
        attribute = target.rpartition(":")[2].rsplit(".", 1)[-1]
        raise RunError(
            f"{target} has no tools: register them with @{attribute}.tool "
            "in the module before it is loaded here"
        )
    return registry


def load_object(target: str) -> Any:
    """Import ``MODULE`` and return its ``ATTR``, whatever it is."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise RunError(f"expected MODULE:ATTR (like myapp.tools:registry), got {target!r}")
    if module_name.endswith(".py") or "/" in module_name or os.sep in module_name:
        dotted = module_name.removesuffix(".py").replace(os.sep, ".").replace("/", ".").strip(".")
        raise RunError(
            f"{module_name!r} is a file path; MODULE is a dotted module name: "
            f"try {dotted}:{attribute} from the directory that holds {dotted.split('.')[0]}"
        )
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name + ".").startswith(exc.name + "."):
            raise RunError(
                f"no module named {module_name!r} in {cwd} or on sys.path: run from the "
                "directory that holds it, or add that directory to PYTHONPATH"
            ) from None
        raise RunError(f"importing {module_name!r} failed: {exc}") from None
    except Exception as exc:
        raise RunError(f"importing {module_name!r} failed: {type(exc).__name__}: {exc}") from None
    value: Any = module
    for part in attribute.split("."):
        if not hasattr(value, part):
            found = [n for n, v in vars(module).items() if isinstance(v, ToolRegistry)]
            hint = f"; ToolRegistry objects in it: {', '.join(found)}" if found else ""
            raise RunError(f"module {module_name!r} has no attribute {attribute!r}{hint}")
        value = getattr(value, part)
    return value


def registry_for(target: str | None, servers: Sequence[str]) -> ToolRegistry:
    """The registry ``MODULE:ATTR`` names (else an empty one) with each ``--mcp`` server added."""
    if target is None and not servers:
        raise RunError("give MODULE:ATTR (like myapp.tools:registry), or an MCP server with --mcp")
    empty_ok = bool(servers)  # the MCP servers' tools are listed later
    registry = load_registry(target, empty_ok=empty_ok) if target is not None else ToolRegistry()
    for spec in servers:
        from livebridge.mcp import MCPServer

        try:
            registry.add_mcp(MCPServer.parse(spec))
        except ValueError as exc:
            raise RunError(f"bad --mcp {spec!r}: {exc}") from None
        except ImportError as exc:
            raise RunError(f"--mcp: {exc}") from None
    return registry


@asynccontextmanager
async def mcp_listed(registry: ToolRegistry) -> AsyncIterator[None]:
    """While in this block the registry's MCP servers run, their tools listed (so metrics know
    their names); one that cannot start is a ``RunError``."""
    try:
        async with registry.connect_mcp():
            yield
    except MCPError as exc:
        raise RunError(f"{exc}: check the --mcp command or URL") from None


def policy_fields() -> dict[str, type]:
    """The ``CallPolicy`` settings ``--policy`` accepts, with their types."""
    types = {"int": int, "float": float}
    return {
        f.name: types[str(f.type)] for f in dataclasses.fields(CallPolicy) if str(f.type) in types
    }


def parse_policy(items: Sequence[str]) -> CallPolicy:
    """A ``CallPolicy`` from ``KEY=VALUE`` items."""
    fields = policy_fields()
    settings: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in fields:
            raise RunError(
                f"bad --policy {item!r}: expected KEY=VALUE with KEY one of {', '.join(fields)}"
            )
        kind = fields[key]
        try:
            settings[key] = kind(text)
        except ValueError:
            kind_name = "an integer" if kind is int else "a number"
            raise RunError(f"bad --policy {item!r}: {key} needs {kind_name}") from None
    try:
        return CallPolicy(**settings)
    except ValueError as exc:
        raise RunError(f"bad --policy: {exc}") from None


def require_sdk(name: str, model: str | None) -> Vendor:
    """The vendor ``--vendor name --model model`` means, its SDK installed (else a
    ``RunError`` naming the extra that installs it)."""
    vendor = by_cli(name, model)
    if vendor.extra is not None and importlib.util.find_spec(vendor.sdk) is None:
        raise RunError(
            f"--vendor {name} needs the {vendor.sdk} package: "
            f"pip install 'livebridge-voice[{vendor.extra}]'"
        )
    return vendor


def api_key(vendor: str = "gemini") -> str:
    """The vendor's key from the environment, or a ``RunError`` saying which to set."""
    names = by_cli(vendor).key_variables
    for name in names:
        if os.environ.get(name):
            return os.environ[name]
    wanted = names[0] + (f" (or {' or '.join(names[1:])})" if names[1:] else "")
    raise RunError(f"no API key: set {wanted}, or add --emulator to run against the local emulator")


# -- the session ----------------------------------------------------------------------------


async def _run(
    args: argparse.Namespace, registry: ToolRegistry, policy: CallPolicy, key: str | None
) -> int:
    async with mcp_listed(registry):
        return await _run_listed(args, registry, policy, key)


async def _run_listed(
    args: argparse.Namespace, registry: ToolRegistry, policy: CallPolicy, key: str | None
) -> int:
    observers: list[Observer] = []
    metrics = None
    if args.metrics_port is not None:
        collector = CollectorRegistry()
        observers.append(PrometheusObserver(collector, functions=registry.names()))
        try:
            metrics = serve(args.metrics_port, registry=collector)
        except OSError as exc:
            raise RunError(
                cannot_listen("--metrics-port", "127.0.0.1", args.metrics_port, exc)
            ) from None
        print(f"metrics: {metrics.url}", flush=True)
    vendor = by_cli(args.vendor, args.model)
    variable = vendor.base_url_variable
    where = os.environ.get(variable) or f"the {vendor.title} API"
    try:
        if args.emulator:
            where = "the emulator"
            async with Emulator(**vendor.emulator_options(args.model)) as emu:
                client = getattr(emu, vendor.emulator_client)()
                return await _converse(client, args, registry, policy, observers)
        client = vendor.new_client(api_key=key)
        return await _converse(client, args, registry, policy, observers)
    except RunError:
        raise
    except Exception as exc:
        raise RunError(_connection_failure(exc, where, args.model, vendor)) from None
    finally:
        if metrics is not None:
            metrics.close()


def _connection_failure(exc: Exception, where: str, model: str, vendor: Vendor) -> str:
    """One line for a session that could not start or went away (an error of the vendor's
    SDK says what it is by itself)."""
    variable = vendor.base_url_variable
    if isinstance(exc, ModelNotFoundError):
        return f"model {model!r} is not available for the Live API: pass --model with a Live model"
    if isinstance(exc, ConnectionLostError | OSError):
        detail = exc.reason if isinstance(exc, ConnectionLostError) and exc.reason else str(exc)
        return f"cannot reach {where} ({detail}): check the network, or {variable}"
    if isinstance(exc, InvalidStatus):
        status = exc.response.status_code
        hint = "check your API key" if status in (401, 403) else f"is {where} a Live API endpoint?"
        return f"{where} refused the connection (HTTP {status}): {hint}"
    sdk_error = type(exc).__module__.startswith(vendor.sdk + ".")
    if isinstance(exc, LiveSessionError | WebSocketException) or sdk_error:
        return f"the Live session failed: {exc}"
    return f"the Live session failed: {type(exc).__name__}: {exc}"


async def _converse(
    client: Any,
    args: argparse.Namespace,
    registry: ToolRegistry,
    policy: CallPolicy,
    observers: list[Observer],
) -> int:
    text_config = by_cli(args.vendor, args.model).text_config
    config: Any = dict(text_config) if text_config is not None else None
    try:
        async with LiveSession.connect(
            client,
            model=args.model,
            tools=registry,
            config=config,
            policy=policy,
            observers=observers,
        ) as session:
            print(f"connected to {args.model}; tools: {', '.join(registry.names())}", flush=True)
            printer = _Printer()
            async with aclosing(_turns(args.text)) as turns:
                async for text in turns:
                    printer.user(text)
                    await session.send_text(text)
                    if not await printer.until_turn_complete(session):
                        break
    except SessionEndedError as ended:  # the service or the network ended it mid-turn
        if ended.error is not None:
            raise RunError(f"the session ended: {ended.reason}") from None
    return 0


async def _turns(texts: Sequence[str]) -> AsyncGenerator[str]:
    """The ``--text`` turns, or else one turn per non-empty line of standard input."""
    if texts:
        for text in texts:
            yield text
        return
    while True:
        if sys.stdin.isatty():
            print("you > ", end="", flush=True)
        line = await anyio.to_thread.run_sync(sys.stdin.readline)
        if not line:
            return
        if line.strip():
            yield line.strip()


class _Printer:
    """Prints a turn as it happens: the reply as it streams, each tool call as it settles.

    A reply may come twice, as text and as the transcript of its speech (GPT-Live's backend
    writes the text its voice then speaks): of a turn, only the kind that came first is printed.
    """

    def __init__(self) -> None:
        self.args: dict[str, Any] = {}
        self.mid_reply = False
        self.reply_kind: type | None = None  # TextOut or OutputTranscript, in this turn

    def user(self, text: str) -> None:
        print(f"you   > {text}", flush=True)

    def _end_reply(self) -> None:
        if self.mid_reply:
            print(flush=True)
            self.mid_reply = False

    async def until_turn_complete(self, session: LiveSession) -> bool:
        """Print events until the model's turn ends; False if the session ended instead."""
        while True:
            event = await session.next_event()
            match event:
                case None | Closed():
                    self._end_reply()
                    return False
                case TextOut(text=text) | OutputTranscript(text=text):
                    self.reply_kind = self.reply_kind or type(event)
                    if type(event) is not self.reply_kind:
                        continue
                    if not self.mid_reply:
                        print("model > ", end="")
                        self.mid_reply = True
                    print(text, end="", flush=True)
                case ToolCallStarted():
                    self.args[event.call_id] = event.args
                case ToolCallSettled():
                    self._end_reply()
                    print(f"  {_call_line(event, self.args.pop(event.call_id, {}))}", flush=True)
                case TurnComplete():
                    self._end_reply()
                    self.reply_kind = None
                    return True
                case _:
                    pass


def _call_line(event: ToolCallSettled, args: Any) -> str:
    arguments = ", ".join(f"{k}={v!r}" for k, v in args.items()) if isinstance(args, dict) else ""
    mark = "✓" if event.outcome == "ok" else "✗"
    line = f"{mark} {event.name}({arguments}) → {event.ending} in {event.latency * 1000:.0f} ms"
    if event.error:
        line += f": {event.error.get('message') or event.error.get('type')}"
    return line
