"""Reading fields from an SDK object or from a dict of the same shape."""

from __future__ import annotations

from typing import Any

import msgspec

from livebridge.calls.call import UnreadableArguments


def field(item: Any, name: str) -> Any:
    """``item[name]`` for a mapping, ``item.name`` otherwise; ``None`` when absent."""
    if isinstance(item, dict):
        return item.get(name)
    return getattr(item, name, None)


def parse_arguments(arguments: Any) -> Any:
    """JSON-decode an arguments string; an empty one means no arguments.

    A string that cannot be read (not JSON, nested too deeply, or not valid Unicode: a lone UTF-16
    surrogate)
    becomes ``UnreadableArguments`` saying why, which the dispatcher answers
    ``invalid_arguments``: that call fails alone, whatever its siblings carry.
    """
    if not isinstance(arguments, str | bytes):
        return arguments
    if not arguments.strip():
        return {}
    try:
        return msgspec.json.decode(arguments)
    except msgspec.DecodeError as exc:
        return UnreadableArguments(f"the arguments are not valid JSON ({exc})")
    except RecursionError:
        return UnreadableArguments("the arguments are nested too deeply to read")
    except UnicodeEncodeError as exc:  # a str msgspec cannot encode to UTF-8 to read it
        return UnreadableArguments(
            f"the arguments are not valid Unicode text ({exc.reason} at character {exc.start})"
        )
