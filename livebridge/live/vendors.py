"""Connectors open Live connections for a session: the one place that knows a vendor's SDK.

A ``Connector`` turns a resumption handle into an open ``Transport`` and builds the protocol that
understands its messages; the session shell asks it for a connection whenever it (re)connects and
never sees an SDK. A shared handle store is a wrapper around a connector, not an edit of the
session. ``connector_for`` picks the vendor's descriptor from the client's type (and the model's
name) in ``VENDORS``; each connector is imported on first use, so this package loads no SDK by
itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

from livebridge.calls.tools import ToolRegistry
from livebridge.errors import UsageError
from livebridge.profiles import ModelProfile
from livebridge.protocol.base import Connector
from livebridge.protocol.transport import CONNECT_SECONDS, TLS_READ_BUFFER, TransportKind
from livebridge.protocol.vendor import Vendor
from livebridge.vendors import DESCRIPTORS

#: Each vendor's descriptor by name (``livebridge.protocol.vendor.Vendor``: its client class,
#: connector, declarations, emulator side, ...). A new vendor is its folder under
#: ``livebridge/vendors/``, which exports ``VENDOR``, and one line in ``DESCRIPTORS``.
VENDORS: Final[Mapping[str, Vendor]] = MappingProxyType({v.name: v for v in DESCRIPTORS})


def _is(cls: type, spec: str) -> bool:
    """Is ``cls`` the class ``spec`` (``package.Class``) names, from any module of the package?"""
    package, _, name = spec.rpartition(".")
    module = cls.__module__
    return cls.__name__ == name and (module == package or module.startswith(package + "."))


def _pick(candidates: list[Vendor], model: str | None) -> Vendor:
    """Among the vendors of one client (or one ``--vendor``), the one ``model`` selects: one
    whose prefixes it starts with, else the one without prefixes."""
    if model is not None:
        for vendor in candidates:
            if vendor.selects(model):
                return vendor
    return next((v for v in candidates if not v.model_prefixes), candidates[0])


def vendor_for(client: Any, model: str | None = None) -> Vendor | None:
    """The descriptor for ``client`` (an instance of a vendor's client class, or a subclass)
    and ``model``, else None: an ``openai.AsyncOpenAI`` is OpenAI Realtime, or GPT-Live with a
    ``gpt-live`` model. Reads the class's module: no SDK is imported to tell."""
    for cls in type(client).__mro__:
        found = [v for v in VENDORS.values() if _is(cls, v.client_class)]
        if found:
            return _pick(found, model)
        for vendor in VENDORS.values():
            for sync in vendor.sync_clients:
                if _is(cls, sync):
                    raise UsageError(
                        f"LiveSession needs {vendor.client_class}, not {sync}: the realtime "
                        "connection is asynchronous"
                    )
    return None


def vendor_of(client: Any) -> str | None:
    """The command-line name of ``client``'s vendor (``"gemini"``, ``"openai"``), else None."""
    vendor = vendor_for(client)
    return vendor.cli if vendor is not None else None


def by_cli(name: str, model: str | None = None) -> Vendor:
    """The descriptor ``--vendor name --model model`` means (``openai`` with a ``gpt-live``
    model: GPT-Live); ``UsageError`` for a name no vendor has."""
    found = [v for v in VENDORS.values() if v.cli == name]
    if not found:
        names = ", ".join(sorted({v.cli for v in VENDORS.values()}))
        raise UsageError(f"unknown vendor {name!r} (one of {names})")
    return _pick(found, model)


def by_model(model: str) -> Vendor | None:
    """The vendor whose model prefixes ``model`` starts with (``gpt-live-1.1``: GPT-Live),
    else None: most model names do not say their vendor."""
    return next((v for v in VENDORS.values() if v.selects(model)), None)


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
    the ``SessionOptions`` fields only some vendors' connectors take (GPT-Live's ``delegate``
    and ``attach``, its descriptor's ``session_options``): given to another vendor's session,
    a ``UsageError`` naming the field.
    Adding a vendor is one line in ``VENDORS`` (and its folder under ``livebridge/vendors/``,
    whose descriptor names its connector): its connector takes these same arguments.
    """
    vendor = vendor_for(client, model)
    if vendor is None:
        classes = sorted({v.client_class for v in VENDORS.values()})
        raise UsageError(
            f"LiveSession cannot tell the vendor of a {type(client).__module__}."
            f"{type(client).__name__}: pass a {', '.join(classes)} or a connector"
        )
    for name in sorted(extra.keys() - vendor.session_options):
        takers = [v.title for v in VENDORS.values() if name in v.session_options]
        raise UsageError(
            f"SessionOptions.{name} is for {' and '.join(takers) or 'no vendor'} sessions, "
            f"not {vendor.title} ({model or 'no model'})"
        )
    factory: Callable[..., Connector] = vendor.connector_class()
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
