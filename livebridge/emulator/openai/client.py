"""An ``openai.AsyncOpenAI`` pointed at the emulator, trusting its CA and nothing else.

The SDK opens its realtime websocket with the ``websockets`` library, outside its HTTP client,
and takes TLS settings only per ``connect`` call (``websocket_connection_options``). The client
built here adds the emulator's SSL context to every ``client.realtime.connect(...)`` that does
not bring its own, so code under test calls the SDK exactly as it would against the service.
A separate program reaches the emulator through the environment instead (``Emulator.env()``:
``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, and ``SSL_CERT_FILE``, which the default SSL context
of ``websockets`` reads).
"""

from __future__ import annotations

import ssl
from functools import cached_property
from typing import Any

import openai
from openai.resources.realtime.realtime import AsyncRealtime, AsyncRealtimeConnectionManager


class _TrustingRealtime(AsyncRealtime):
    def __init__(self, client: openai.AsyncOpenAI, context: ssl.SSLContext) -> None:
        super().__init__(client)
        self._context = context

    def connect(self, **kwargs: Any) -> AsyncRealtimeConnectionManager:
        options = dict(kwargs.pop("websocket_connection_options", None) or {})
        options.setdefault("ssl", self._context)
        return super().connect(websocket_connection_options=options, **kwargs)  # type: ignore[arg-type]


class EmulatorOpenAI(openai.AsyncOpenAI):
    """``openai.AsyncOpenAI`` whose realtime connections trust ``ssl_context``."""

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._emulator_context = ssl_context or ssl.create_default_context()

    @cached_property
    def realtime(self) -> AsyncRealtime:
        return _TrustingRealtime(self, self._emulator_context)

    def copy(self, *args: Any, **kwargs: Any) -> EmulatorOpenAI:
        """``copy``/``with_options`` keep trusting the emulator."""
        copied = super().copy(*args, **kwargs)
        assert isinstance(copied, EmulatorOpenAI)
        copied._emulator_context = self._emulator_context
        return copied

    with_options = copy


def openai_client(base_url: str, context: ssl.SSLContext, **kwargs: Any) -> openai.AsyncOpenAI:
    """A client for the emulator at ``base_url`` (``https://127.0.0.1:PORT``); ``kwargs`` go to
    ``openai.AsyncOpenAI`` (``api_key`` defaults to ``"test"``)."""
    kwargs.setdefault("api_key", "test")
    kwargs.setdefault("base_url", f"{base_url}/v1")
    return EmulatorOpenAI(ssl_context=context, **kwargs)
