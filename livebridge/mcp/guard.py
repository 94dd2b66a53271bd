"""Run an MCP stdio server so that it ends with the process that started it.

``python -m livebridge.mcp.guard COMMAND ARGS...`` asks Linux to send the server SIGTERM when
its parent dies (``PR_SET_PDEATHSIG``, kept across ``exec``), then becomes the server. The MCP
SDK starts servers in a session of their own, out of reach of the signals sent to the app's
process group: without this, an app killed by SIGTERM (or SIGKILL) would leave behind every
server that does not notice its standard input closing. (Linux ties the signal to the thread
that started the server: the event loop's, which lives as long as the connection.)
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def available() -> bool:
    """Whether this platform can tie a child's life to its parent's (Linux)."""
    return sys.platform.startswith("linux")


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m livebridge.mcp.guard COMMAND [ARGS...]", file=sys.stderr)
        return 2
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        print("livebridge.mcp.guard: prctl failed; running unguarded", file=sys.stderr)
    if os.getppid() != parent:  # the parent died before the request took effect
        return 1
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"livebridge.mcp.guard: cannot run {argv[0]!r}: {exc}", file=sys.stderr)
        return 127
    return 0  # pragma: no cover (exec does not return)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
