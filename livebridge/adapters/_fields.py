"""Reading fields from an SDK object or from a dict of the same shape."""

from __future__ import annotations

from typing import Any

__all__ = [
    "field",
    "parse_arguments",
]


def field(item: Any, name: str) -> Any:
    """``item[name]`` for a mapping, ``item.name`` otherwise; ``None`` when absent."""
    if isinstance(item, dict):
        return item.get(name)
    return getattr(item, name, None)


def parse_arguments(arguments: Any) -> Any:
    """JSON-decode an arguments string; an empty one means no arguments.

    A string that is not JSON is returned unchanged, so that the dispatcher answers it as
    ``invalid_arguments`` (arguments must be an object).
    """
    import msgspec

    if not isinstance(arguments, str | bytes):
        return arguments
    if not arguments.strip():
        return {}
    try:
        return msgspec.json.decode(arguments)
    except msgspec.DecodeError:
        return arguments
