from typing import Annotated, Literal

import msgspec
import pytest
from google.genai import types

from livebridge import CallContext, ToolRegistry


class Location(msgspec.Struct):
    lat: float
    lon: float


def test_schema_from_type_hints() -> None:
    tools = ToolRegistry()

    @tools.tool
    async def forecast(
        city: str,
        context: CallContext,
        days: Annotated[int, msgspec.Meta(ge=1, le=7)] = 1,
        unit: Literal["C", "F"] = "C",
        near: Location | None = None,
    ) -> dict[str, str]:
        """Weather for a city."""
        return {}

    tool = tools.get("forecast")
    assert tool is not None
    assert tool.description == "Weather for a city."
    schema = tool.parameters_json_schema
    assert schema["required"] == ["city"]
    assert set(schema["properties"]) == {"city", "days", "unit", "near"}  # no CallContext
    assert schema["properties"]["days"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 7,
        "default": 1,
    }
    assert schema["properties"]["unit"] == {"enum": ["C", "F"], "default": "C"}
    assert schema["properties"]["near"]["anyOf"] == [
        {"$ref": "#/$defs/Location"},
        {"type": "null"},
    ]
    assert schema["$defs"]["Location"]["required"] == ["lat", "lon"]
    assert tool.context_parameter == "context"


def test_arguments_are_converted_to_the_handler_types() -> None:
    tools = ToolRegistry()

    @tools.tool
    async def place(near: Location, days: int = 2) -> None: ...

    tool = tools.get("place")
    assert tool is not None
    converted = tool.convert_arguments({"near": {"lat": 1.5, "lon": 2}})
    assert msgspec.structs.asdict(converted) == {"near": Location(1.5, 2.0), "days": 2}
    with pytest.raises(msgspec.ValidationError, match=r"\$\.near\.lat"):
        tool.convert_arguments({"near": {"lat": "north", "lon": 2}})


def test_decorator_forms_options_and_handler_kinds() -> None:
    tools = ToolRegistry()

    @tools.tool(name="book", behavior="NON_BLOCKING", scheduling="WHEN_IDLE", timeout=3.0)
    async def book_table(people: int) -> str:
        return "ok"

    @tools.tool(idempotent=True, max_concurrency=2)
    def lookup(key: str) -> str:
        return key

    @tools.tool(behavior="NON_BLOCKING")
    async def ticker(n: int):  # type: ignore[no-untyped-def]
        yield n

    assert tools.names() == ["book", "lookup", "ticker"]
    assert "book" in tools and "book_table" not in tools and len(tools) == 3
    book, look, tick = (tools.get(n) for n in tools.names())
    assert book is not None and look is not None and tick is not None
    assert (book.behavior, book.scheduling, book.timeout) == ("NON_BLOCKING", "WHEN_IDLE", 3.0)
    assert (book.kind, look.kind, tick.kind) == ("async", "sync", "stream")
    assert tick.streaming and not book.streaming
    assert look.idempotent and look.max_concurrency == 2 and look.limiter is not None
    assert book_table.__name__ == "book_table"  # the decorator returns the function itself
    assert tools.get("missing") is None


def test_declarations_always_state_the_behavior() -> None:
    """A declaration without ``behavior`` means NON_BLOCKING on gemini-3.8-live and BLOCKING on
    2.5: livebridge never leaves the service to guess."""
    tools = ToolRegistry()

    @tools.tool
    async def blocking(x: int) -> int:
        return x

    @tools.tool(behavior="NON_BLOCKING")
    async def background(x: int) -> int:
        return x

    first, second = tools.declarations()
    assert isinstance(first, types.FunctionDeclaration)
    assert first.behavior == types.Behavior.BLOCKING
    assert second.behavior == types.Behavior.NON_BLOCKING
    assert not tools.get("blocking").behavior_declared  # type: ignore[union-attr]
    assert tools.get("background").behavior_declared  # type: ignore[union-attr]
    assert first.parameters_json_schema == {
        "type": "object",
        "properties": {"x": {"type": "integer"}},
        "required": ["x"],
        "additionalProperties": False,
    }


def test_registration_errors() -> None:
    tools = ToolRegistry()

    @tools.tool
    async def once() -> None: ...

    with pytest.raises(ValueError, match="already registered"):
        tools.add(once)
    with pytest.raises(ValueError, match="must start with"):
        tools.add(once, name="has space")
    with pytest.raises(ValueError, match="behavior"):
        tools.add(once, name="b", behavior="SOMETIMES")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        tools.add(once, name="t", timeout=0)

    def sync_generator() -> object:
        yield 1

    with pytest.raises(TypeError, match="async generators"):
        tools.add(sync_generator)

    async def variadic(*values: int) -> None: ...

    with pytest.raises(TypeError, match="by keyword"):
        tools.add(variadic)


def test_a_blocking_async_generator_is_refused_at_registration() -> None:
    tools = ToolRegistry()

    async def ticker(n: int):  # type: ignore[no-untyped-def]
        yield n

    with pytest.raises(ValueError, match='behavior="NON_BLOCKING"'):
        tools.tool(ticker)
    with pytest.raises(ValueError, match='behavior="NON_BLOCKING"'):
        tools.add(ticker, behavior="BLOCKING")
    assert "ticker" not in tools


@pytest.mark.parametrize(
    ("args", "named"), [([1, 2], "list"), ("x", "str"), (3, "int"), (None, "null")]
)
def test_arguments_that_are_not_an_object_are_refused(args: object, named: str) -> None:
    tools = ToolRegistry()

    @tools.tool
    async def anything() -> None:
        """Takes nothing."""

    tool = tools.get("anything")
    assert tool is not None
    with pytest.raises(msgspec.ValidationError, match=f"must be a JSON object, not {named}"):
        tool.convert_arguments(args)


def test_tool_options_are_checked() -> None:
    tools = ToolRegistry()

    async def charge(order: str) -> None:
        """Charge an order."""

    with pytest.raises(TypeError, match="idempotency_key"):
        tools.add(charge, idempotency_key="order")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unknown tool option"):
        tools.add(charge, retries=3)  # type: ignore[call-arg]
    tool = tools.add(charge, idempotency_key=lambda args: args["order"])
    assert tool.idempotency_key is not None and tool.idempotency_key({"order": "A1"}) == "A1"


def test_a_tool_can_be_removed_and_registered_again() -> None:
    tools = ToolRegistry()

    @tools.tool
    async def lookup(key: str) -> str:
        """Look a key up."""
        return key

    removed = tools.remove("lookup")
    assert removed.name == "lookup" and "lookup" not in tools and tools.names() == []
    tools.add(lookup, timeout=1.0)
    assert tools.names() == ["lookup"]
    with pytest.raises(KeyError):
        tools.remove("missing")
