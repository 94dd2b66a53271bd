"""A package's public names, each imported from the module it lives in on first use.

Importing ``livebridge`` (or ``livebridge.observe``, ``.phone``, ...) loads no SDK, websockets
or Prometheus code: a package lists where each of its names lives, and the name's module is
imported when the name is first read, then kept in the package so later reads are plain.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def exports(
    package: str, homes: Mapping[str, str], names: Iterable[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` for the names ``homes`` places: a home
    that is ``package.name`` is a sub-module, read as the module itself."""
    namespace = sys.modules[package].__dict__
    listed = sorted(set(names))

    def get(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(home)
        value = module if home == f"{package}.{name}" else getattr(module, name)
        namespace[name] = value  # later look-ups skip this function
        return value

    def listing() -> list[str]:
        return sorted({*namespace, *listed})

    return get, listing
