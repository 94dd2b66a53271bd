"""Connectors open Live connections for a session: the one place that knows a vendor's SDK.

A ``Connector`` turns a resumption handle into an open ``Transport`` and builds the protocol that
understands its messages; the session shell asks it for a connection whenever it (re)connects and
never sees an SDK. A second vendor or a shared handle store is a new connector (or a wrapper
around one), not an edit of the session. ``connector_for`` picks the vendor from the client's
type. ``GeminiConnector`` and ``OpenAIConnector`` are imported on first use, so this package loads
no SDK by itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol

from livebridge.calls.tools import ToolRegistry
from livebridge.errors import UsageError
from livebridge.live.protocol import LiveProtocol, ProtocolOptions
from livebridge.live.transport import Transport, TransportKind
from livebridge.profiles import ModelProfile

if TYPE_CHECKING:
    from livebridge.vendors.gemini.connector import GeminiConnector
    from livebridge.vendors.openai.connector import OpenAIConnector

__all__ = ["Connector", "GeminiConnector", "OpenAIConnector", "connector_for", "vendor_of"]


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


def vendor_of(client: Any) -> str | None:
    """``"gemini"`` for a ``genai.Client``, ``"openai"`` for an ``openai.AsyncOpenAI`` (or a
    subclass), else None. Reads the class's module: neither SDK is imported to tell."""
    for cls in type(client).__mro__:
        package = cls.__module__.split(".", 1)[0]
        if package == "openai" and cls.__name__ in ("AsyncOpenAI", "AsyncAzureOpenAI"):
            return "openai"
        if package == "openai" and cls.__name__ in ("OpenAI", "AzureOpenAI"):
            raise UsageError(
                f"LiveSession needs openai.AsyncOpenAI, not openai.{cls.__name__}: the realtime "
                "connection is asynchronous"
            )
        if cls.__module__.startswith("google.genai") and cls.__name__ == "Client":
            return "gemini"
    return None


def connector_for(
    client: Any,
    *,
    model: str,
    tools: ToolRegistry,
    config: Any = None,
    transport: TransportKind = "wire",
    keepalive: Mapping[str, float] | None = None,
    tls_read_buffer: int = 8 * 1024,
    profile: ModelProfile | None = None,
) -> Connector:
    """The connector for ``client``'s vendor.

    ``config`` is the vendor's own: a ``LiveConnectConfig`` (or dict) for Gemini, a
    ``session.update`` session dict for OpenAI (merged over livebridge's defaults).
    ``profile`` replaces the model profile the connector would choose (``livebridge.profiles``).
    """
    vendor = vendor_of(client)
    factory: Callable[..., Connector]
    if vendor == "gemini":
        from livebridge.vendors.gemini.connector import GeminiConnector as factory
    elif vendor == "openai":
        from livebridge.vendors.openai.connector import OpenAIConnector as factory

        if config is not None and not isinstance(config, Mapping):
            raise UsageError(
                f"OpenAI Realtime takes config as a dict of session fields (session.update), "
                f"not {type(config).__name__}"
            )
    else:
        raise UsageError(
            f"LiveSession cannot tell the vendor of a {type(client).__module__}."
            f"{type(client).__name__}: pass a google.genai.Client or an openai.AsyncOpenAI, "
            "or a connector"
        )
    return factory(
        client,
        model=model,
        tools=tools,
        config=config,
        transport=transport,
        keepalive=keepalive,
        tls_read_buffer=tls_read_buffer,
        profile=profile,
    )


def __getattr__(name: str) -> Any:
    if name == "GeminiConnector":
        from livebridge.vendors.gemini.connector import GeminiConnector

        return GeminiConnector
    if name == "OpenAIConnector":
        from livebridge.vendors.openai.connector import OpenAIConnector

        return OpenAIConnector
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
