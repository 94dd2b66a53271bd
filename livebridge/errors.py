"""Exceptions a tool handler raises on purpose."""

from __future__ import annotations


class ToolError(Exception):
    """A failure whose message is safe to show the model.

    Raise it from a handler to answer ``{"error": {"type": "tool_error", "message": ...}}``;
    any other exception is answered with a generic message and logged with its traceback.
    """

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
