"""The public surface: every exported name resolves, every error is exported, imports stay light."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys

import pytest

import livebridge
from livebridge import errors

_HEAVY = ("google.genai", "websockets", "prometheus_client")


def public_modules() -> list[str]:
    names = ["livebridge"]
    for info in pkgutil.walk_packages(livebridge.__path__, "livebridge."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return names


@pytest.mark.parametrize("name", public_modules())
def test_every_module_declares_all(name: str) -> None:
    assert isinstance(importlib.import_module(name).__dict__.get("__all__"), list)


@pytest.mark.parametrize("name", public_modules())
def test_every_declared_export_resolves(name: str) -> None:
    module = importlib.import_module(name)
    for symbol in getattr(module, "__all__", ()):
        assert hasattr(module, symbol), f"{name}.{symbol} is in __all__ but does not exist"


def test_every_exception_class_is_exported_from_errors_and_the_package() -> None:
    classes = {
        name
        for name, value in vars(errors).items()
        if inspect.isclass(value) and issubclass(value, BaseException)
    }
    assert classes == set(errors.__all__)
    assert classes <= set(livebridge.__all__)
    assert all(issubclass(getattr(errors, name), errors.LivebridgeError) for name in classes)


def test_every_exception_class_anywhere_is_in_the_one_tree() -> None:
    defined = {
        value
        for name in public_modules()
        for value in vars(importlib.import_module(name)).values()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__.startswith("livebridge")
    }
    assert len(defined) > len(errors.__all__) // 2
    for cls in defined:
        assert issubclass(cls, errors.LivebridgeError), f"{cls.__qualname__} is outside the tree"
        assert getattr(errors, cls.__name__, None) is cls, f"{cls.__name__} not in errors"


def test_the_emulator_is_reachable_from_the_package() -> None:
    assert livebridge.emulator.Emulator is not None
    assert "emulator" in dir(livebridge)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        livebridge.nothing  # noqa: B018


@pytest.mark.parametrize(
    "statement",
    [
        "import livebridge",
        "import livebridge.calls.ledger",
        "import livebridge.protocol.actions",
        "import livebridge.vendors.gemini.protocol, livebridge.vendors.openai.protocol",
        "from livebridge import ToolRegistry, ToolError, CallPolicy, LivebridgeError",
    ],
)
def test_light_imports_load_no_sdk_websockets_or_prometheus(statement: str) -> None:
    heavy = f"sorted(m for m in sys.modules if m.startswith({_HEAVY!r}))"
    probe = f"{statement}\nimport sys\nprint({heavy})"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "[]"
