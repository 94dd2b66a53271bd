"""Connectors open Live connections for a session: the one place that knows a vendor's SDK.

A ``Connector`` turns a resumption handle into an open ``Transport`` and builds the protocol that
understands its messages; the session shell asks it for a connection whenever it (re)connects and
never sees an SDK. A second vendor or a shared
handle store is a new connector (or a wrapper around one), not an edit of the session.
``GeminiConnector`` is imported on first use, so this package loads no SDK by itself.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol

from livebridge.protocol.base import LiveProtocol, ProtocolOptions
from livebridge.tools import ToolRegistry
from livebridge.transport import Transport

if TYPE_CHECKING:
    from livebridge.connectors.gemini import GeminiConnector

__all__ = ["Connector", "GeminiConnector"]


class Connector(Protocol):
    """Opens one Live connection at a time for a session, and names the protocol it speaks."""

    def protocol(
        self, tools: ToolRegistry, options: ProtocolOptions, *, observed: bool
    ) -> LiveProtocol:
        """A new protocol state machine for the messages this connector's transports yield."""
        ...

    def open(self, handle: str | None) -> AbstractAsyncContextManager[Transport]:
        """Connect, resuming ``handle`` (None: a fresh session); leaving closes the connection.

        Every way the connection fails or ends is raised as ``errors.TransportClosed``.
        """
        ...


def __getattr__(name: str) -> Any:
    if name == "GeminiConnector":
        from livebridge.connectors.gemini import GeminiConnector

        return GeminiConnector
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
