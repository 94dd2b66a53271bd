"""The tool registry: handlers, their options, and parameter schemas taken from type hints.

A handler's parameters become a msgspec ``Struct``; its JSON Schema is the tool's
``parameters_json_schema`` and ``msgspec.convert`` validates the model's arguments against the
very same types, so the schema the model sees and the check the handler gets never drift apart.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import AsyncIterator, Callable, Hashable, Iterable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypedDict, TypeVar, Unpack, overload

import anyio
import msgspec

from livebridge.calls.approval import Approver
from livebridge.calls.call import (
    BEHAVIORS,
    SCHEDULINGS,
    Behavior,
    CallContext,
    Scheduling,
    UnreadableArguments,
)

if TYPE_CHECKING:
    from google.genai import types

    from livebridge.mcp.server import MCPServer
    from livebridge.mcp.tools import MCPOptions, Sources

HandlerKind = Literal["async", "sync", "stream"]
#: Maps a call's validated arguments to what makes two requests "the same" (e.g. an order id).
IdempotencyKey = Callable[[dict[str, Any]], Hashable]
F = TypeVar("F", bound=Callable[..., Any])

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}")
_convert = msgspec.convert


class ToolOptions(TypedDict, total=False):
    """Every option of ``@tools.tool(...)`` and ``ToolRegistry.add``, with its default.

    - ``name`` (the function's name), ``description`` (its docstring);
    - ``behavior``: ``"BLOCKING"`` or ``"NON_BLOCKING"``; without it, BLOCKING wherever the
      model has blocking calls (``livebridge.profiles``); ``scheduling=None`` (NON_BLOCKING
      answers only);
    - ``timeout=None`` (the policy's), ``max_concurrency=None`` (no per-tool limit);
    - ``idempotent=False``: True lets identical twins of one ``toolCall`` share one run;
    - ``idempotency_key=None``: ``f(arguments) -> key``; calls with the same key within
      ``CallPolicy.idempotency_ttl`` are one request, served from the first successful result;
    - ``expose_errors=False``: True lets any exception's text reach the model;
    - ``approve=None``: ``async f(ApprovalRequest) -> bool | str``, awaited before the handler
      starts; False or a reason answers the call ``denied`` and the handler never runs;
      ``approval_timeout=60.0`` seconds without an answer is a denial;
    - ``irreversible=False``: True holds the handler until the model's turn that issued the
      call is confirmed (``CallPolicy.confirm_window``); a call whose turn is interrupted first
      ends ``cancelled`` without running. Journaled like a non-idempotent tool.
    """

    name: str | None
    description: str | None
    behavior: Behavior
    scheduling: Scheduling | None
    timeout: float | None
    idempotent: bool
    idempotency_key: IdempotencyKey | None
    max_concurrency: int | None
    expose_errors: bool
    approve: Approver | None
    approval_timeout: float
    irreversible: bool


@dataclass(frozen=True, slots=True, eq=False)
class Tool:
    """One registered handler and everything the dispatcher needs to run it."""

    name: str
    description: str | None
    behavior: Behavior
    scheduling: Scheduling | None
    timeout: float | None
    idempotent: bool
    max_concurrency: int | None
    expose_errors: bool
    idempotency_key: IdempotencyKey | None
    handler: Callable[..., Any]
    kind: HandlerKind
    parameters_json_schema: dict[str, Any]
    arguments_type: type[msgspec.Struct]
    context_parameter: str | None
    limiter: anyio.CapacityLimiter | None = field(repr=False)
    #: True when the app named a behavior; False: ``behavior`` is the BLOCKING default, which a
    #: model without blocking calls replaces (``ModelProfile.adapt``).
    behavior_declared: bool = True
    #: Whether the handler's yields go out as partial answers (``willContinue``): an async
    #: generator, on a model that has streamed answers; else its items make one answer.
    streaming: bool = field(default=False, repr=False)
    approve: Approver | None = field(default=None, repr=False)
    approval_timeout: float = 60.0
    irreversible: bool = False
    #: Something must allow the handler to start (a confirmed turn, an approval): its timeout
    #: runs from then, not from the call's arrival. Set once, here: it is read for every call.
    gated: bool = field(init=False, repr=False)
    #: Its arguments are converted as declared (``convert_arguments`` not overridden), and
    #: nothing is to be decided before its handler runs but its deadline: no idempotency key,
    #: no context parameter, not gated. Set once, here: the dispatcher reads one flag per call.
    plain: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        gated = self.irreversible or self.approve is not None
        object.__setattr__(self, "gated", gated)
        plain = (
            not gated
            and self.idempotency_key is None
            and self.context_parameter is None
            and type(self).convert_arguments is Tool.convert_arguments
        )
        object.__setattr__(self, "plain", plain)

    def convert_arguments(self, args: Any) -> msgspec.Struct:
        """Validate and convert the model's arguments.

        Raises ``msgspec.ValidationError`` saying what was wrong; arguments that are not a
        JSON object (a list, a string, a number, null) are refused before msgspec sees them,
        and arguments the decoder could not read say why (``UnreadableArguments``).
        """
        if not isinstance(args, dict):
            if isinstance(args, UnreadableArguments):
                raise msgspec.ValidationError(args.reason)
            got = "null" if args is None else type(args).__name__
            raise msgspec.ValidationError(f"arguments must be a JSON object, not {got}")
        return _convert(args, self.arguments_type)

    def declaration(self) -> types.FunctionDeclaration:
        """Its google-genai declaration (``vendors/gemini/declarations.py`` builds it: the
        shape and the SDK are Gemini's, loaded on first use)."""
        from livebridge.vendors.gemini.declarations import declaration

        return declaration(self)


class ToolRegistry:
    """The set of tools one application exposes to the model."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._mcp: Sources | None = None

    def get(self, name: str) -> Tool | None:
        """The tool registered under ``name``, if any."""
        return self._tools.get(name)

    @overload
    def tool(self, fn: F, /) -> F: ...

    @overload
    def tool(self, /, **options: Unpack[ToolOptions]) -> Callable[[F], F]: ...

    def tool(self, fn: Callable[..., Any] | None = None, /, **options: Unpack[ToolOptions]) -> Any:
        """Register a handler; usable bare (``@tools.tool``) or with options (``ToolOptions``)."""

        def register(handler: Callable[..., Any]) -> Callable[..., Any]:
            self.add(handler, **options)
            return handler

        return register if fn is None else register(fn)

    def add(self, handler: Callable[..., Any], /, **options: Unpack[ToolOptions]) -> Tool:
        """Register ``handler`` without decorator syntax and return its ``Tool``."""
        unknown = set(options) - set(ToolOptions.__annotations__)
        if unknown:
            raise TypeError(f"unknown tool option(s): {', '.join(sorted(unknown))}")
        tool_name = options.get("name") or handler.__name__
        behavior = options.get("behavior") or "BLOCKING"
        scheduling = options.get("scheduling")
        timeout = options.get("timeout")
        max_concurrency = options.get("max_concurrency")
        idempotency_key = options.get("idempotency_key")
        if not _NAME.fullmatch(tool_name):
            raise ValueError(
                f"tool name {tool_name!r} must start with a letter or underscore and hold at most"
                " 64 letters, digits, underscores, dots or dashes"
            )
        if tool_name in self._tools:
            raise ValueError(f"a tool named {tool_name!r} is already registered")
        if behavior not in BEHAVIORS:
            raise ValueError(f"behavior must be one of {BEHAVIORS}, not {behavior!r}")
        if scheduling is not None and scheduling not in SCHEDULINGS:
            raise ValueError(f"scheduling must be one of {SCHEDULINGS}, not {scheduling!r}")
        if timeout is not None and not timeout > 0:
            raise ValueError("timeout must be positive")
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        if idempotency_key is not None and not callable(idempotency_key):
            raise TypeError("idempotency_key must be a function of the arguments dict")
        approve = options.get("approve")
        approval_timeout = options.get("approval_timeout", 60.0)
        if approve is not None and not callable(approve):
            raise TypeError("approve must be a function of the ApprovalRequest")
        if not approval_timeout > 0:
            raise ValueError("approval_timeout must be positive")
        kind = _handler_kind(handler)
        if kind == "stream" and behavior != "NON_BLOCKING":
            raise ValueError(
                f"tool {tool_name!r} is an async generator, which streams its answers: register"
                ' it with behavior="NON_BLOCKING" (a BLOCKING call gets exactly one answer)'
            )
        arguments_type, context_parameter = _arguments_type(handler, tool_name)
        tool = Tool(
            name=tool_name,
            description=options.get("description") or inspect.getdoc(handler),
            behavior=behavior,
            scheduling=scheduling,
            timeout=timeout,
            idempotent=options.get("idempotent", False),
            max_concurrency=max_concurrency,
            expose_errors=options.get("expose_errors", False),
            idempotency_key=idempotency_key,
            handler=handler,
            kind=kind,
            parameters_json_schema=_parameters_schema(arguments_type),
            arguments_type=arguments_type,
            context_parameter=context_parameter,
            limiter=anyio.CapacityLimiter(max_concurrency) if max_concurrency else None,
            behavior_declared=options.get("behavior") is not None,
            streaming=kind == "stream",
            approve=approve,
            approval_timeout=approval_timeout,
            irreversible=options.get("irreversible", False),
        )
        self._tools[tool_name] = tool
        return tool

    def add_mcp(self, server: MCPServer, /, **options: Unpack[MCPOptions]) -> None:
        """Declare the tools of an MCP server (``livebridge.mcp``) when a session connects.

        ``options`` are ``ToolOptions`` for each of its tools (``timeout`` 10 s unless given)
        and ``include`` / ``exclude`` / ``prefix`` / ``per_tool`` (``MCPOptions``). The server
        is started and its tools listed by ``connect_mcp``, which ``LiveSession.connect`` uses.
        """
        from livebridge.mcp.tools import Sources

        if self._mcp is None:
            self._mcp = Sources()
        self._mcp.add(server, options)

    @asynccontextmanager
    async def connect_mcp(self) -> AsyncIterator[ToolRegistry]:
        """While in this block the registry's MCP servers run and their tools are registered
        (listed once, shared by every block of the process using them; the last to leave stops
        them). Raises ``MCPError`` naming a server that cannot start or list its tools."""
        if self._mcp is None:
            yield self
            return
        async with self._mcp.in_use(self):
            yield self

    def register(self, tools: Iterable[Tool]) -> None:
        """Add tools built elsewhere (an MCP server's), by name; a name taken is a ValueError."""
        tools = list(tools)
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools.update((tool.name, tool) for tool in tools)

    def with_tools(self, tools: Iterable[Tool]) -> ToolRegistry:
        """A new registry holding ``tools`` (e.g. this one's, adapted to a model), by name."""
        registry = ToolRegistry()
        for tool in tools:
            registry._tools[tool.name] = tool
        return registry

    def remove(self, name: str) -> Tool:
        """Unregister the tool ``name`` (to register another handler under it); KeyError if none."""
        return self._tools.pop(name)

    def names(self) -> list[str]:
        """Registered tool names, in registration order."""
        return list(self._tools)

    def declarations(self) -> list[types.FunctionDeclaration]:
        """One ``google.genai.types.FunctionDeclaration`` per tool (Gemini's shape: another
        vendor's is its descriptor's ``declare``)."""
        from livebridge.vendors.gemini.declarations import declarations

        return declarations(self)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())


def _handler_kind(handler: Callable[..., Any]) -> HandlerKind:
    if inspect.isasyncgenfunction(handler):
        return "stream"
    if inspect.iscoroutinefunction(handler):
        return "async"
    if inspect.isgeneratorfunction(handler):
        raise TypeError("generator handlers must be async generators (async def ... yield)")
    return "sync"


def _arguments_type(
    handler: Callable[..., Any], tool_name: str
) -> tuple[type[msgspec.Struct], str | None]:
    """A Struct with one field per model-visible parameter, and the CallContext parameter."""
    hints = typing.get_type_hints(handler, include_extras=True)
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    context_parameter: str | None = None
    for parameter in inspect.signature(handler).parameters.values():
        if parameter.kind not in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY):
            raise TypeError(
                f"tool {tool_name!r}: parameter {parameter.name!r} must be passable by keyword"
            )
        hint = hints.get(parameter.name, Any)
        if hint is CallContext:
            context_parameter = parameter.name
        elif parameter.default is parameter.empty:
            fields.append((parameter.name, hint))
        else:
            fields.append((parameter.name, hint, parameter.default))
    struct = msgspec.defstruct(
        f"{tool_name}_arguments", fields, kw_only=True, forbid_unknown_fields=True
    )
    return struct, context_parameter


def _parameters_schema(arguments_type: type[msgspec.Struct]) -> dict[str, Any]:
    """The arguments object schema, with nested types under ``$defs`` when there are any."""
    (_,), components = msgspec.json.schema_components(
        [arguments_type], ref_template="#/$defs/{name}"
    )
    schema = dict(components.pop(arguments_type.__name__))
    schema.pop("title", None)
    if components:
        schema["$defs"] = components
    return schema
