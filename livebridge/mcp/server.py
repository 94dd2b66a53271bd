"""Where an MCP server is: a command to run (stdio) or a URL (streamable HTTP).

An ``MCPServer`` is a plain description; the connection to it (``livebridge.mcp.connection``)
is made when a session that uses its tools connects, and shared by every session of the process.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

#: How long a server gets to start, initialize and list its tools before ``connect`` gives up.
START_TIMEOUT = 10.0


@dataclass(frozen=True, eq=False)
class MCPServer:
    """One MCP server; make it with ``MCPServer.stdio(...)`` or ``MCPServer.http(...)``.

    Compared by identity: two sessions share one connection when they use the same object.
    """

    kind: Literal["stdio", "http"]
    #: What errors, logs and metrics call it: the command's program or the URL's host and path.
    name: str
    command: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    start_timeout: float = START_TIMEOUT

    @classmethod
    def stdio(
        cls,
        command: str,
        *args: str,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        name: str | None = None,
        start_timeout: float = START_TIMEOUT,
    ) -> MCPServer:
        """A server run as a child process speaking MCP on its standard input and output.

        ``env`` is added to a minimal inherited environment (``PATH``, ``HOME``, ...), as the
        MCP SDK does; the process ends with the last session that uses it.
        """
        if not command:
            raise ValueError("MCPServer.stdio needs a command")
        label = name or _program(command, args)
        return cls(
            "stdio",
            label,
            command=(command, *args),
            env=dict(env) if env is not None else None,
            cwd=str(cwd) if cwd is not None else None,
            start_timeout=_positive(start_timeout),
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        start_timeout: float = START_TIMEOUT,
    ) -> MCPServer:
        """A server reached over streamable HTTP at ``url`` (``headers`` go with every request,
        e.g. ``Authorization``)."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"MCPServer.http needs an http(s) URL, not {url!r}")
        label = name or (parts.hostname or "") + (parts.path.rstrip("/") or "")
        return cls(
            "http",
            label,
            url=url,
            headers=dict(headers or {}),
            start_timeout=_positive(start_timeout),
        )

    @classmethod
    def parse(cls, spec: str) -> MCPServer:
        """A command-line spelling: an ``http(s)://`` URL, else a command line (shell quoting)."""
        spec = spec.strip()
        if spec.startswith(("http://", "https://")):
            return cls.http(spec)
        words = shlex.split(spec)
        if not words or "://" in words[0]:
            raise ValueError("an MCP server is a command line or an http(s):// URL")
        return cls.stdio(*words)

    def __repr__(self) -> str:
        return f"MCPServer.{self.kind}({self.name!r})"


def _program(command: str, args: tuple[str, ...]) -> str:
    """A stdio server's short name: its program up to the first argument that is not an option
    (``python server.py``, ``python -m weather``, ``npx -y @acme/kb``), files by their name."""
    words = [Path(command).name]
    for arg in args:
        words.append(Path(arg).name if "/" in arg and not arg.startswith("@") else arg)
        if not arg.startswith("-"):
            break
    return " ".join(words)


def _positive(seconds: float) -> float:
    if not seconds > 0:
        raise ValueError("start_timeout must be positive")
    return seconds
