"""MCP's shapes in livebridge's words, without I/O: schemas, names, results, progress.

A listed MCP tool becomes a declaration whose parameters are its ``inputSchema`` cleaned for
the vendors (the same ``parameters_json_schema`` path every tool takes); a ``CallToolResult``
becomes the call's output or its error answer; a progress notification becomes a partial answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from livebridge.errors import ToolError

_INVALID = re.compile(r"[^A-Za-z0-9_.\-]")
#: Schema keywords whose value maps names to schemas (a property named ``title`` is kept).
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})
#: Keywords that describe a schema to people, not to the model's arguments.
_DROPPED = frozenset({"title", "$schema", "$id", "$comment", "examples"})


def declared_name(prefix: str, remote: str) -> str:
    """The name the model sees: ``prefix`` + the server's name, with any character a vendor
    refuses replaced by ``_`` and cut to 64 (a clash that makes is reported at connect)."""
    name = _INVALID.sub("_", prefix + remote)
    if not name or not (name[0].isalpha() or name[0] == "_"):
        name = "_" + name
    return name[:64]


def parameters(input_schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """The tool's ``inputSchema`` as a function's parameters: an object schema, without the
    keywords meant for people (``title``, ``$schema``), which cost tokens and which some
    vendors' schema subsets refuse."""
    schema = _clean(dict(input_schema or {}))
    assert isinstance(schema, dict)
    schema["type"] = "object"
    schema.setdefault("properties", {})
    return schema


def _clean(node: Any) -> Any:
    if isinstance(node, dict):
        cleaned: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROPPED and not isinstance(value, dict | list):
                continue
            if key in _SCHEMA_MAPS and isinstance(value, dict):
                cleaned[key] = {name: _clean(schema) for name, schema in value.items()}
            else:
                cleaned[key] = _clean(value)
        return cleaned
    if isinstance(node, list):
        return [_clean(item) for item in node]
    return node


def argument_checker(schema: Mapping[str, Any]) -> Callable[[dict[str, Any]], None]:
    """A check of a call's arguments against the server's ``inputSchema``: refused calls are
    answered ``invalid_arguments`` without a round trip (``msgspec.ValidationError``)."""
    from jsonschema import validators

    cls = validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except Exception:  # a schema the validator cannot read: the server checks its own input
        return lambda arguments: None
    validator = cls(schema)

    def check(arguments: dict[str, Any]) -> None:
        error = next(iter(validator.iter_errors(arguments)), None)
        if error is not None:
            where = "/".join(str(part) for part in error.absolute_path)
            raise msgspec.ValidationError(
                f"{error.message}" + (f" - at `$.{where}`" if where else "")
            )

    return check


def output(result: Any) -> Any:
    """A ``CallToolResult``'s output: its ``structuredContent``, else its content (one text as
    a string, several parts as a list). ``isError`` raises ``ToolError`` with the server's
    text: MCP tool errors are written for the model."""
    if result.is_error:
        text = _text(result.content) or "the tool reported an error without a message"
        raise ToolError(text)
    if result.structured_content is not None:
        return result.structured_content
    parts = [_part(block) for block in result.content]
    if len(parts) == 1 and isinstance(parts[0], str):
        return parts[0]
    return parts


def _text(content: list[Any]) -> str:
    return "\n".join(block.text for block in content if getattr(block, "type", None) == "text")


def _part(block: Any) -> Any:
    """One content block: text as it is; media and resources described, never inlined (a voice
    model cannot use base64)."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return block.text
    described: dict[str, Any] = {"type": kind}
    for attribute in ("mime_type", "uri", "name"):
        value = getattr(block, attribute, None)
        if value is not None:
            described[attribute] = str(value)
    resource = getattr(block, "resource", None)
    if resource is not None:
        text = getattr(resource, "text", None)
        described["uri"] = str(resource.uri)
        if text is not None:
            described["text"] = text
    return described


def progress(value: float, total: float | None, message: str | None) -> dict[str, Any]:
    """A progress notification as a partial answer's output."""
    update: dict[str, Any] = {"progress": value}
    if total is not None:
        update["total"] = total
    if message is not None:
        update["message"] = message
    return update
