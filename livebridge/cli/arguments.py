"""Argument types shared by the subcommands."""

from __future__ import annotations

import argparse

__all__ = ["port_number"]


def port_number(text: str) -> int:
    """An argparse ``type`` for a TCP port: 0 (any free port) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port: use 1-65535, or 0 for any free")
    return port
