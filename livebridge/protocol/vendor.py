"""What the rest of livebridge knows of a vendor: one ``Vendor`` descriptor per folder.

Each folder under ``livebridge/vendors/`` exports one (``VENDOR`` in its ``__init__``); the
session shell, the recorder, the replay and the command read it instead of comparing a
vendor's name. Its code is named as ``module:Name`` paths, imported on first use, so reading a
descriptor loads no SDK.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from livebridge.profiles import Backend


def load(path: str) -> Any:
    """The object a ``module:Name`` path names, its module imported now."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True, slots=True)
class Vendor:
    """One vendor's facts, read where code would otherwise branch on its name."""

    #: The key of ``live.vendors.VENDORS``, and a recording header's ``vendor``.
    name: str
    #: The API in words, for messages: ``"Gemini Live"``.
    title: str
    #: What ``--vendor`` says for it on the command line (GPT-Live: ``openai`` with a
    #: ``gpt-live`` model).
    cli: str
    #: The async client class of its SDK, as ``package.Class`` (read from a client's classes).
    client_class: str
    #: Its ``Connector``, as ``module:Class``.
    connector: str
    #: Builds a ``ToolRegistry``'s declarations for its API, as ``module:function``.
    declarations: str
    #: The model ``--model`` defaults to.
    default_model: str
    #: The SDK package a program imports, and the extra that installs it
    #: (``pip install 'livebridge-voice[<extra>]'``; None: a core dependency).
    sdk: str
    extra: str | None
    #: Where its SDK reads another endpoint from, named in connection errors.
    base_url_variable: str
    #: The environment variables that hold its API key, the first preferred.
    key_variables: tuple[str, ...]
    #: The emulator's side that speaks its wire, as ``Emulator`` keyword arguments.
    emulator: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: Model-name prefixes that select it among the vendors of one client class (empty: the
    #: client's vendor for every other model).
    model_prefixes: tuple[str, ...] = ()
    #: The audio it takes and gives, as ``type;rate=N`` (the default formats).
    input_audio: str = "audio/pcm;rate=16000"
    output_audio: str = "audio/pcm;rate=24000"
    #: Synchronous clients of its SDK, refused with the async class to use instead.
    sync_clients: tuple[str, ...] = ()
    #: Its recording codec (``LiveProtocol.recording_codec`` gives one per session), as
    #: ``module:Class``; None: its sessions are not recorded.
    recording: str | None = None
    #: The model a replay of its recordings asks for (None: its recordings are not replayed),
    #: and the config it connects with (the vendor's own shape).
    replay_model: str | None = None
    replay_config: Mapping[str, Any] | None = None
    #: The backend whose model profiles (``livebridge.profiles``) describe its models.
    backend: Backend = "developer"
    #: The ``Emulator`` method that gives a client of its SDK trusting the emulator.
    emulator_client: str = "client"
    #: The config of a text conversation (``livebridge run``: typed turns, printed replies).
    text_config: Mapping[str, Any] | None = None
    #: The ``SessionOptions`` fields only its connector takes (GPT-Live's ``delegate`` and
    #: ``attach``); set on a session of another vendor, one is a ``UsageError`` at connect.
    session_options: frozenset[str] = frozenset()

    def selects(self, model: str) -> bool:
        """Does ``model`` (a bare name or a ``models/…`` path) start with one of its prefixes?
        (Among the vendors of one client, the one without prefixes takes every other model.)"""
        bare = model.rpartition("/")[2]
        return any(bare.startswith(prefix) for prefix in self.model_prefixes)

    def emulator_options(self, model: str) -> dict[str, Any]:
        """The ``Emulator`` options that serve its wire (one that takes the model: as
        ``model``)."""
        options: dict[str, Any] = dict(self.emulator)
        if "model" in options:
            options["model"] = model
        return options

    def new_client(self, **kwargs: Any) -> Any:
        """A client of its SDK (``client_class``, imported now) made with ``kwargs``."""
        module, _, name = self.client_class.rpartition(".")
        return load(f"{module}:{name}")(**kwargs)

    def connector_class(self) -> Any:
        """Its connector, imported now."""
        return load(self.connector)

    def declare(self, tools: Any) -> list[Any]:
        """``tools``' declarations in its API's shape (its SDK imported now)."""
        result: list[Any] = load(self.declarations)(tools)
        return result
