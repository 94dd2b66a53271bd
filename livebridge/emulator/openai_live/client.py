"""An ``openai.AsyncOpenAI`` pointed at the emulator whose ``live.connect()`` trusts its CA.

The SDK opens the Live websocket outside its HTTP client and takes TLS settings only per
``connect`` call (``websocket_connection_options``); this client adds the emulator's SSL context
to each call that brings none (``live.connect()``, ``live.sideband.connect()``), so code under
test calls the SDK as it would the service.
"""

from __future__ import annotations

import ssl
from functools import cached_property
from typing import Any

import openai
from openai.resources.live.live import AsyncLive, AsyncLiveConnectionManager
from openai.resources.live.sideband import AsyncSideband, AsyncSidebandConnectionManager

from livebridge.emulator.openai.client import EmulatorOpenAI


class _TrustingLive(AsyncLive):
    def __init__(self, client: openai.AsyncOpenAI, context: ssl.SSLContext) -> None:
        super().__init__(client)
        self._context = context

    def connect(self, **kwargs: Any) -> AsyncLiveConnectionManager:  # type: ignore[override]
        options = dict(kwargs.pop("websocket_connection_options", None) or {})
        options.setdefault("ssl", self._context)
        return super().connect(websocket_connection_options=options, **kwargs)  # type: ignore[arg-type]

    @cached_property
    def sideband(self) -> AsyncSideband:
        return _TrustingSideband(self._client, self._context)


class _TrustingSideband(AsyncSideband):
    def __init__(self, client: openai.AsyncOpenAI, context: ssl.SSLContext) -> None:
        super().__init__(client)
        self._context = context

    def connect(self, **kwargs: Any) -> AsyncSidebandConnectionManager:
        options = dict(kwargs.pop("websocket_connection_options", None) or {})
        options.setdefault("ssl", self._context)
        return super().connect(websocket_connection_options=options, **kwargs)  # type: ignore[arg-type]


class _LiveEmulatorOpenAI(EmulatorOpenAI):
    @cached_property
    def live(self) -> AsyncLive:
        return _TrustingLive(self, self._emulator_context)


def live_client(base_url: str, context: ssl.SSLContext, **kwargs: Any) -> openai.AsyncOpenAI:
    kwargs.setdefault("api_key", "test")
    kwargs.setdefault("base_url", f"{base_url}/v1")
    return _LiveEmulatorOpenAI(ssl_context=context, **kwargs)
