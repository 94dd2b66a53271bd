"""An MCP server's tools as ordinary livebridge tools.

``ToolRegistry.add_mcp`` records a source (a server, a filter, a prefix, options); when the
first session connects, ``Sources.in_use`` starts each server, lists its tools and registers
one ``MCPTool`` per tool, whose handler is a thin request over the shared connection. From then
on they are tools like any other: limits, twins, re-issues, idempotency keys, the journal,
metrics and traces see no difference. The last session to leave stops the servers.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import AsyncIterator, Collection, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from livebridge.calls.call import BEHAVIORS, Result
from livebridge.calls.tools import IdempotencyKey, Tool, ToolOptions
from livebridge.errors import MCPError
from livebridge.mcp import translate
from livebridge.mcp.connection import Connection, connection_for
from livebridge.mcp.server import MCPServer

if TYPE_CHECKING:
    import mcp_types

    from livebridge.calls.tools import ToolRegistry

log = logging.getLogger("livebridge.mcp")

#: Seconds an MCP call may take unless its options say otherwise.
DEFAULT_TIMEOUT = 10.0
#: Options that name or describe one tool: per tool only, never for a whole server.
_PER_TOOL_ONLY = frozenset({"name", "description"})


class MCPOptions(ToolOptions, total=False):
    """``add_mcp``'s options: ``ToolOptions`` for every tool of the server (except ``name`` and
    ``description``), and

    - ``include`` / ``exclude``: the server's tool names to keep / to leave out;
    - ``prefix``: put before each name the model sees (``kb_search``), against clashes;
    - ``per_tool``: ``{server_tool_name: ToolOptions}`` overriding any option for one tool
      (``name`` renames it).
    """

    include: Collection[str] | None
    exclude: Collection[str]
    prefix: str
    per_tool: Mapping[str, ToolOptions]


class _Arguments(msgspec.Struct, frozen=True):
    """An MCP call's arguments as one field: the server's schema, not Python types, says
    what they may be (checked by ``MCPTool.convert_arguments``)."""

    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True, eq=False)
class MCPTool(Tool):
    """A tool of an MCP server: ``remote`` is its name there, ``server`` the server's label."""

    server: str = ""
    remote: str = ""
    check: Any = field(default=None, repr=False)
    source: Source | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        Tool.__post_init__(self)  # a slots dataclass is a new class: bare super() fails
        # Progress streams as partial answers only where the model takes them (``streaming``,
        # set by the model's profile); elsewhere the call is one plain request.
        source = self.source
        if source is None:
            return
        streams = self.behavior == "NON_BLOCKING" and self.streaming
        object.__setattr__(self, "kind", "stream" if streams else "async")
        handler = source.stream(self.remote) if streams else source.request(self.remote)
        object.__setattr__(self, "handler", handler)

    def convert_arguments(self, args: Any) -> msgspec.Struct:
        if not isinstance(args, dict):
            return super().convert_arguments(args)  # raises, saying why
        if self.check is not None:
            self.check(args)
        return _Arguments(args)


@dataclass(eq=False)
class Source:
    """One ``add_mcp``: the server and how its tools are to be declared."""

    server: MCPServer
    options: MCPOptions
    connection: Connection = field(init=False)

    def __post_init__(self) -> None:
        self.connection = connection_for(self.server)

    def request(self, remote: str) -> Any:
        async def call(arguments: dict[str, Any]) -> Any:
            return translate.output(await self.connection.call(remote, arguments))

        return call

    def stream(self, remote: str) -> Any:
        """A handler yielding the newest progress as it comes, then the result: a server that
        floods progress is read at the pace the session sends partial answers."""

        async def call(arguments: dict[str, Any]) -> AsyncIterator[Any]:
            newest: list[dict[str, Any]] = []
            arrived = anyio.Event()
            outcome: list[Any] = []

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                nonlocal arrived
                newest[:] = [translate.progress(progress, total, message)]
                arrived.set()

            async def run() -> None:
                nonlocal arrived
                try:
                    outcome.append(await self.connection.call(remote, arguments, on_progress))
                except Exception as exc:
                    outcome.append(exc)
                arrived.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                while not outcome:
                    await arrived.wait()
                    arrived = anyio.Event()
                    if newest and not outcome:
                        update, newest[:] = newest[0], []
                        yield update
            (result,) = outcome
            if isinstance(result, Exception):
                raise result
            yield Result(translate.output(result))

        return call

    def tools(self, listed: list[mcp_types.Tool], taken: Mapping[str, str]) -> list[MCPTool]:
        """One ``MCPTool`` per listed tool the filters keep; ``taken`` maps names already
        declared to who declared them (a clash is an ``MCPError`` naming both)."""
        options = self.options
        name = self.server.name
        include = options.get("include")
        exclude = set(options.get("exclude") or ())
        per_tool = dict(options.get("per_tool") or {})
        remote_names = {tool.name for tool in listed}
        missing = sorted({*(include or ()), *per_tool} - remote_names)
        if missing:
            raise MCPError(
                name,
                f"has no tool {', '.join(map(repr, missing))} (it lists "
                f"{', '.join(sorted(remote_names)) or 'none'})",
            )
        made: list[MCPTool] = []
        seen = dict(taken)
        for listed_tool in listed:
            remote = listed_tool.name
            if (include is not None and remote not in include) or remote in exclude:
                continue
            tool = self._tool(listed_tool, per_tool.get(remote, {}))
            other = seen.get(tool.name)
            if other is not None:
                raise MCPError(
                    name,
                    f"its tool {remote!r} is declared as {tool.name!r}, which {other} already "
                    "declares: give the server a prefix= or exclude= the tool",
                )
            seen[tool.name] = f"MCP server {name!r} (tool {remote!r})"
            made.append(tool)
        return made

    def _tool(self, listed: mcp_types.Tool, own: ToolOptions) -> MCPTool:
        shared = {k: v for k, v in self.options.items() if k in ToolOptions.__annotations__}
        options: dict[str, Any] = {**shared, **own}
        name = options.get("name") or translate.declared_name(
            self.options.get("prefix", ""), listed.name
        )
        behavior = options.get("behavior") or "BLOCKING"
        if behavior not in BEHAVIORS:
            raise MCPError(self.server.name, f"behavior must be one of {BEHAVIORS}")
        schema = translate.parameters(listed.input_schema)
        key: IdempotencyKey | None = options.get("idempotency_key")
        max_concurrency = options.get("max_concurrency")
        return MCPTool(
            name=name,
            description=options.get("description") or listed.description or listed.title,
            behavior=behavior,
            scheduling=options.get("scheduling"),
            timeout=options.get("timeout") or DEFAULT_TIMEOUT,
            idempotent=options.get("idempotent", False),
            max_concurrency=max_concurrency,
            expose_errors=options.get("expose_errors", False),
            idempotency_key=(lambda kwargs: key(kwargs["arguments"])) if key else None,
            handler=_unbound,
            kind="stream" if behavior == "NON_BLOCKING" else "async",
            parameters_json_schema=schema,
            arguments_type=_Arguments,
            context_parameter=None,
            limiter=anyio.CapacityLimiter(max_concurrency) if max_concurrency else None,
            behavior_declared=options.get("behavior") is not None,
            streaming=behavior == "NON_BLOCKING",
            server=self.server.name,
            remote=listed.name,
            check=translate.argument_checker(dict(listed.input_schema or {})),
            source=self,
        )


async def _unbound(arguments: dict[str, Any]) -> Any:  # replaced in MCPTool.__post_init__
    raise AssertionError("an MCP tool without its source")


class Sources:
    """A registry's MCP servers and the sessions using them (``in_use``)."""

    def __init__(self) -> None:
        self.sources: list[Source] = []
        self.users = 0
        self._lock: anyio.Lock | None = None
        self._exit: AsyncExitStack | None = None

    def add(self, server: MCPServer, options: MCPOptions) -> None:
        if not isinstance(server, MCPServer):
            raise TypeError("add_mcp takes an MCPServer (MCPServer.stdio(...) or .http(...))")
        if importlib.util.find_spec("mcp") is None:
            raise ImportError("add_mcp needs the MCP SDK: pip install 'livebridge-voice[mcp]'")
        unknown = set(options) - set(MCPOptions.__annotations__)
        if unknown:
            raise TypeError(f"unknown add_mcp option(s): {', '.join(sorted(unknown))}")
        shared = _PER_TOOL_ONLY & set(options)
        if shared:
            raise TypeError(
                f"{', '.join(sorted(shared))} name(s) one tool: give it in per_tool=, not for "
                "the whole server"
            )
        timeout = options.get("timeout")
        if timeout is not None and not timeout > 0:
            raise ValueError("timeout must be positive")
        self.sources.append(Source(server, options))

    @asynccontextmanager
    async def in_use(self, registry: ToolRegistry) -> AsyncIterator[None]:
        """While a session uses the registry: its servers run and their tools are registered."""
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            if self.users == 0:
                await self._open(registry)
            self.users += 1
        try:
            yield
        finally:
            self.users -= 1
            if self.users == 0 and self._exit is not None:
                exit_stack, self._exit = self._exit, None
                with anyio.CancelScope(shield=True):
                    await exit_stack.aclose()

    async def _open(self, registry: ToolRegistry) -> None:
        """Start every server at once (each bounded by its ``start_timeout``), then register
        their tools in place of the previous listing's."""
        stack = AsyncExitStack()
        listed: dict[int, list[mcp_types.Tool]] = {}
        try:
            async with anyio.create_task_group() as tg:
                for index, source in enumerate(self.sources):
                    tg.start_soon(self._acquire, stack, source, listed, index)
        except BaseExceptionGroup as group:
            await stack.aclose()
            raise _first_mcp_error(group) from None
        except BaseException:
            await stack.aclose()
            raise
        try:
            for tool in list(registry):
                if isinstance(tool, MCPTool):
                    registry.remove(tool.name)
            taken = {name: f"the registry's tool {name!r}" for name in registry.names()}
            made: list[MCPTool] = []
            for index, source in enumerate(self.sources):
                tools = source.tools(listed[index], taken)
                taken.update((tool.name, f"MCP server {source.server.name!r}") for tool in tools)
                made.extend(tools)
            registry.register(made)
        except BaseException:
            await stack.aclose()
            raise
        self._exit = stack

    async def _acquire(
        self,
        stack: AsyncExitStack,
        source: Source,
        listed: dict[int, list[mcp_types.Tool]],
        index: int,
    ) -> None:
        connection = source.connection
        listed[index] = await connection.acquire()
        stack.push_async_callback(connection.release)


def _first_mcp_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first ``MCPError`` of a group of failed starts (else its first failure)."""
    errors = group.subgroup(MCPError)
    inner: BaseException = errors if errors is not None else group
    while isinstance(inner, BaseExceptionGroup):
        inner = inner.exceptions[0]
    return inner
