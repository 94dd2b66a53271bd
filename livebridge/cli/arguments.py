"""Argument types and messages shared by the subcommands: one wording for each kind of mistake."""

from __future__ import annotations

import argparse
import os

_PORTS = "use a number from 0 to 65535 (0: any free port)"


def port_number(text: str) -> int:
    """An argparse ``type`` for a TCP port: 0 (any free port) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: {_PORTS}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port: {_PORTS}")
    return port


def cannot_listen(flag: str, host: str, port: int, error: OSError) -> str:
    """The one line for a port that cannot be bound (in use, not permitted, no such address)."""
    reason = os.strerror(error.errno) if error.errno else str(error)
    return f"cannot listen on {host}:{port} ({reason}): pick another {flag}, or 0 for any free port"
