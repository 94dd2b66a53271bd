"""Connectors open Live connections for a session: the one place that knows a vendor's SDK.

A ``Connector`` turns a resumption handle into an open ``Transport`` and builds the protocol that
understands its messages; the session shell asks it for a connection whenever it (re)connects and
never sees an SDK. A shared handle store is a wrapper around a connector, not an edit of the
session. ``connector_for`` picks the vendor from the client's type in ``VENDORS``; each connector
is imported on first use, so this package loads no SDK by itself.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

from livebridge.calls.tools import ToolRegistry
from livebridge.errors import UsageError
from livebridge.profiles import ModelProfile
from livebridge.protocol.base import Connector
from livebridge.protocol.transport import CONNECT_SECONDS, TLS_READ_BUFFER, TransportKind

#: Each vendor by name: the async client class of its SDK (``package.Class``: read from the
#: client's classes, so no SDK is imported to tell) and its connector as ``module:Class``,
#: imported on first use. A new vendor is its folder under ``livebridge/vendors/`` and one line.
VENDORS: Final[Mapping[str, tuple[str, str]]] = MappingProxyType(
    {
        "gemini": ("google.genai.Client", "livebridge.vendors.gemini.connector:GeminiConnector"),
        "openai": ("openai.AsyncOpenAI", "livebridge.vendors.openai.connector:OpenAIConnector"),
    }
)
#: Model-name prefixes that select another protocol of a vendor's client, as ``module:Class``:
#: an ``openai.AsyncOpenAI`` with a ``gpt-live`` model speaks GPT-Live, not Realtime.
_BY_MODEL: Final[Mapping[tuple[str, str], str]] = MappingProxyType(
    {("openai", "gpt-live"): "livebridge.vendors.openai_live.connector:GptLiveConnector"}
)
#: Synchronous clients of a vendor SDK, refused with a word on the async one to use instead.
_SYNC_CLIENTS: Final = {
    "openai.AzureOpenAI": "openai.AsyncOpenAI",
    "openai.OpenAI": "openai.AsyncOpenAI",
}


def _is(cls: type, spec: str) -> bool:
    """Is ``cls`` the class ``spec`` (``package.Class``) names, from any module of the package?"""
    package, _, name = spec.rpartition(".")
    module = cls.__module__
    return cls.__name__ == name and (module == package or module.startswith(package + "."))


def vendor_of(client: Any) -> str | None:
    """The name in ``VENDORS`` whose client ``client`` is (or subclasses), else None: e.g.
    ``"gemini"`` for a ``genai.Client``, ``"openai"`` for an ``openai.AsyncOpenAI``. Reads the
    class's module: no SDK is imported to tell."""
    for cls in type(client).__mro__:
        for vendor, (client_class, _) in VENDORS.items():
            if _is(cls, client_class):
                return vendor
        for sync, wanted in _SYNC_CLIENTS.items():
            if _is(cls, sync):
                raise UsageError(
                    f"LiveSession needs {wanted}, not {sync}: the realtime connection is "
                    "asynchronous"
                )
    return None


def _load(path: str) -> Any:
    """The object a ``module:Name`` path names, its module imported now."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def connector_for(
    client: Any,
    *,
    model: str,
    tools: ToolRegistry,
    config: Any = None,
    transport: TransportKind = "wire",
    keepalive: Mapping[str, float] | None = None,
    tls_read_buffer: int = TLS_READ_BUFFER,
    connect_timeout: float = CONNECT_SECONDS,
    profile: ModelProfile | None = None,
    **extra: Any,
) -> Connector:
    """The connector for ``client``'s vendor, from ``VENDORS``.

    ``config`` is the vendor's own: a ``LiveConnectConfig`` (or dict) for Gemini, a
    ``session.update`` session dict for OpenAI (merged over livebridge's defaults).
    ``profile`` replaces the model profile the connector would choose (``livebridge.profiles``);
    ``connect_timeout`` bounds the opening of each connection (``SessionOptions``); ``extra``:
    what only one vendor's connector takes (GPT-Live's ``delegate``).
    Adding a vendor is one line in ``VENDORS`` (and its folder under ``livebridge/vendors/``):
    its connector takes these same arguments.
    """
    vendor = vendor_of(client)
    if vendor is None:
        raise UsageError(
            f"LiveSession cannot tell the vendor of a {type(client).__module__}."
            f"{type(client).__name__}: pass a {', '.join(c for c, _ in VENDORS.values())} "
            "or a connector"
        )
    path = VENDORS[vendor][1]
    for (owner, prefix), connector in _BY_MODEL.items():
        if owner == vendor and model.rpartition("/")[2].startswith(prefix):
            path = connector
    factory: Callable[..., Connector] = _load(path)
    return factory(
        client,
        model=model,
        tools=tools,
        config=config,
        transport=transport,
        keepalive=keepalive,
        tls_read_buffer=tls_read_buffer,
        connect_timeout=connect_timeout,
        profile=profile,
        **extra,
    )


def __getattr__(name: str) -> Any:
    """The vendors' connectors (``GeminiConnector``, ...), imported on first use."""
    for _, connector in VENDORS.values():
        if connector.endswith(":" + name):
            return _load(connector)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
