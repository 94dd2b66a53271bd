"""A registry's tools as google-genai ``FunctionDeclaration``s: what Gemini Live is told.

The vendor-free registry (``calls/tools.py``) knows each tool's name, description, JSON schema
and behavior; this shape is Gemini's, and so is its SDK.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from google.genai import types

if TYPE_CHECKING:
    from livebridge.calls.tools import Tool


def declaration(tool: Tool) -> types.FunctionDeclaration:
    """One tool's declaration, its ``behavior`` always stated: what a declaration without one
    means differs between models (NON_BLOCKING on ``gemini-3.8-live``)."""
    return types.FunctionDeclaration(
        name=tool.name,
        description=tool.description,
        parameters_json_schema=tool.parameters_json_schema,
        behavior=types.Behavior(tool.behavior),
    )


def declarations(tools: Iterable[Tool]) -> list[types.FunctionDeclaration]:
    """One declaration per tool, in the registry's order."""
    return [declaration(tool) for tool in tools]
