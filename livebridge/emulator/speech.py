"""What the emulated model says about a function response: plain words, never raw JSON."""

from __future__ import annotations

from typing import Any


def spoken(response: dict[str, Any] | None) -> str:
    """``{"output": {"sky": "sunny", "celsius": 21}}`` → ``"sky sunny, celsius 21"``."""
    if not response:
        return "no answer"
    error = response.get("error")
    if isinstance(error, dict):
        return f"that failed ({error.get('message') or error.get('type') or 'no reason given'})"
    return _words(response.get("output", response))


def _words(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(
            f"{str(key).replace('_', ' ')} {_words(item)}" for key, item in value.items()
        )
    if isinstance(value, list | tuple):
        return ", ".join(_words(item) for item in value)
    return str(value)
