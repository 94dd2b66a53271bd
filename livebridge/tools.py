"""The tool registry: handlers, their options, and parameter schemas taken from type hints.

A handler's parameters become a msgspec ``Struct``; its JSON Schema is the tool's
``parameters_json_schema`` and ``msgspec.convert`` validates the model's arguments against the
very same types, so the schema the model sees and the check the handler gets never drift apart.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import anyio
import msgspec

from livebridge.calls import Behavior, CallContext, Scheduling

if TYPE_CHECKING:
    from google.genai import types

HandlerKind = Literal["async", "sync", "stream"]
F = TypeVar("F", bound=Callable[..., Any])

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}")
_BEHAVIORS = ("BLOCKING", "NON_BLOCKING")
_SCHEDULINGS = ("SILENT", "WHEN_IDLE", "INTERRUPT")


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
    handler: Callable[..., Any]
    kind: HandlerKind
    parameters_json_schema: dict[str, Any]
    arguments_type: type[msgspec.Struct]
    context_parameter: str | None
    limiter: anyio.CapacityLimiter | None = field(repr=False)

    @property
    def streaming(self) -> bool:
        """True for async-generator handlers, whose yields are streamed as partial answers."""
        return self.kind == "stream"

    def convert_arguments(self, args: Any) -> msgspec.Struct:
        """Validate and convert the model's arguments; raises ``msgspec.ValidationError``."""
        return msgspec.convert({} if args is None else args, self.arguments_type)

    def declaration(self) -> types.FunctionDeclaration:
        """The ``google.genai`` declaration; ``behavior`` is set only when non-blocking."""
        from google.genai import types

        return types.FunctionDeclaration(
            name=self.name,
            description=self.description,
            parameters_json_schema=self.parameters_json_schema,
            behavior=types.Behavior.NON_BLOCKING if self.behavior == "NON_BLOCKING" else None,
        )


class ToolRegistry:
    """The set of tools one application exposes to the model."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    @overload
    def tool(self, fn: F, /) -> F: ...

    @overload
    def tool(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        behavior: Behavior = "BLOCKING",
        scheduling: Scheduling | None = None,
        timeout: float | None = None,
        idempotent: bool = False,
        max_concurrency: int | None = None,
        expose_errors: bool = False,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        behavior: Behavior = "BLOCKING",
        scheduling: Scheduling | None = None,
        timeout: float | None = None,
        idempotent: bool = False,
        max_concurrency: int | None = None,
        expose_errors: bool = False,
    ) -> Any:
        """Register a handler; usable bare (``@tools.tool``) or with options.

        ``expose_errors=True`` lets the text of any exception the handler raises reach the model;
        by default only ``ToolError`` messages do.
        """

        def register(handler: Callable[..., Any]) -> Callable[..., Any]:
            self.add(
                handler,
                name=name,
                description=description,
                behavior=behavior,
                scheduling=scheduling,
                timeout=timeout,
                idempotent=idempotent,
                max_concurrency=max_concurrency,
                expose_errors=expose_errors,
            )
            return handler

        return register if fn is None else register(fn)

    def add(
        self,
        handler: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        behavior: Behavior = "BLOCKING",
        scheduling: Scheduling | None = None,
        timeout: float | None = None,
        idempotent: bool = False,
        max_concurrency: int | None = None,
        expose_errors: bool = False,
    ) -> Tool:
        """Register ``handler`` without decorator syntax and return its ``Tool``."""
        tool_name = name or handler.__name__
        if not _NAME.fullmatch(tool_name):
            raise ValueError(
                f"tool name {tool_name!r} must start with a letter or underscore and hold at most"
                " 64 letters, digits, underscores, dots or dashes"
            )
        if tool_name in self._tools:
            raise ValueError(f"a tool named {tool_name!r} is already registered")
        if behavior not in _BEHAVIORS:
            raise ValueError(f"behavior must be one of {_BEHAVIORS}, not {behavior!r}")
        if scheduling is not None and scheduling not in _SCHEDULINGS:
            raise ValueError(f"scheduling must be one of {_SCHEDULINGS}, not {scheduling!r}")
        if timeout is not None and not timeout > 0:
            raise ValueError("timeout must be positive")
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        arguments_type, context_parameter = _arguments_type(handler, tool_name)
        tool = Tool(
            name=tool_name,
            description=description or inspect.getdoc(handler),
            behavior=behavior,
            scheduling=scheduling,
            timeout=timeout,
            idempotent=idempotent,
            max_concurrency=max_concurrency,
            expose_errors=expose_errors,
            handler=handler,
            kind=_handler_kind(handler),
            parameters_json_schema=_parameters_schema(arguments_type),
            arguments_type=arguments_type,
            context_parameter=context_parameter,
            limiter=anyio.CapacityLimiter(max_concurrency) if max_concurrency else None,
        )
        self._tools[tool_name] = tool
        return tool

    def get(self, name: str) -> Tool | None:
        """The tool registered under ``name``, if any."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """Registered tool names, in registration order."""
        return list(self._tools)

    def declarations(self) -> list[types.FunctionDeclaration]:
        """One ``google.genai.types.FunctionDeclaration`` per tool."""
        return [tool.declaration() for tool in self._tools.values()]

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
