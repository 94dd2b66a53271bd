"""The public surface: the decided names at the top level, a few documented public modules, every
other module internal (no ``__all__``), every exported name resolves, imports stay light."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import livebridge
from livebridge import errors

_HEAVY = ("google.genai", "websockets", "prometheus_client")
REPOSITORY = Path(__file__).resolve().parent.parent

#: What an app writes, importable from ``livebridge`` itself (docs/architecture.md, "Public and
#: internal"): the session, tools and policy, the events it matches on, observers, stores, the
#: one error tree, and the emulator.
TOP_LEVEL = {
    # the session
    "LiveSession",
    "SessionArgs",
    "SessionOptions",
    "ModelProfile",
    "client_args",
    # tools, calls and the policy
    "ToolRegistry",
    "ToolOptions",
    "Tool",
    "Call",
    "CallContext",
    "Outcome",
    "Partial",
    "Result",
    "ApprovalRequest",
    "CallPolicy",
    "Dispatcher",
    # the app's events
    "SessionEvent",
    "AudioOut",
    "TextOut",
    "InputTranscript",
    "OutputTranscript",
    "TurnComplete",
    "Interrupted",
    "ToolCallStarted",
    "ToolCallSettled",
    "GoAway",
    "Resumed",
    "ErrorReported",
    "Closed",
    "EventsDropped",
    # observers and stores
    "Observer",
    "Recorder",
    "MemoryStore",
    "RedisStore",
    "PostgresStore",
    "RedisLimiter",
    # the local Live servers
    "emulator",
    # and every exception (``livebridge.errors``)
    *errors.__all__,
}

#: The modules with an ``__all__``: the package and its documented public modules. The three
#: adapters are reached as ``livebridge.adapters.gemini``, ``.openai`` and ``.anthropic``.
PUBLIC_MODULES = {
    "livebridge",
    "livebridge.adapters",
    "livebridge.emulator",
    "livebridge.errors",
    "livebridge.integrations.livekit",
    "livebridge.integrations.openai_agents",
    "livebridge.integrations.pipecat",
    "livebridge.mcp",
    "livebridge.observe",
    "livebridge.phone",
    "livebridge.profiles",
    "livebridge.recording",
    "livebridge.recording.replay",
    "livebridge.store",
    "livebridge.vendors.anthropic",
    "livebridge.vendors.gemini.adapter",
    "livebridge.vendors.openai.adapter",
}


def all_modules() -> list[str]:
    names = ["livebridge"]
    names += [info.name for info in pkgutil.walk_packages(livebridge.__path__, "livebridge.")]
    return [name for name in names if name != "livebridge.__main__"]  # a script: it runs


def declared_all(name: str) -> bool:
    """Whether the module's source assigns ``__all__`` (read, not imported: an internal module
    may need an optional SDK)."""
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None
    for node in ast.walk(ast.parse(Path(spec.origin).read_text())):
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign | ast.AugAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return True
    return False


def test_the_top_level_is_the_decided_list() -> None:
    assert set(livebridge.__all__) == TOP_LEVEL
    assert len(livebridge.__all__) == len(TOP_LEVEL)  # no name twice
    for name in livebridge.__all__:
        assert getattr(livebridge, name) is not None, name
    assert set(dir(livebridge)) >= TOP_LEVEL


def test_only_the_public_modules_declare_all() -> None:
    modules = all_modules()
    assert set(modules) >= PUBLIC_MODULES
    declaring = {name for name in modules if declared_all(name)}
    assert declaring == PUBLIC_MODULES, "internal modules declare no __all__"


@pytest.mark.parametrize("name", sorted(PUBLIC_MODULES))
def test_every_name_a_public_module_exports_resolves(name: str) -> None:
    module = importlib.import_module(name)
    assert isinstance(module.__dict__.get("__all__"), list)
    assert len(set(module.__all__)) == len(module.__all__), name
    for symbol in module.__all__:
        assert getattr(module, symbol) is not None, f"{name}.{symbol}"
    assert set(dir(module)) >= set(module.__all__)


def test_the_internal_packages_say_so() -> None:
    packages = [
        name
        for name in all_modules()
        if hasattr(importlib.import_module(name), "__path__")
        and name not in PUBLIC_MODULES
        and name != "livebridge.integrations"  # a folder of public modules, one per framework
    ]
    assert "livebridge.calls" in packages
    for name in packages:
        assert "internal" in (importlib.import_module(name).__doc__ or "").lower(), name
    assert "internal" in (livebridge.__doc__ or "")


#: Internal modules a page may still import from, and why.
DOCS_MAY_IMPORT = {
    "livebridge.demo": "the demo's own tools, to replay the demo's recording",
    "livebridge.demo.script": "the demo's own tools, to replay the demo's recording",
    "livebridge.live.vendors": "docs/vendors.md's section for contributors adding a vendor",
}


def test_the_readme_docs_and_examples_import_only_public_modules() -> None:
    sources = [
        REPOSITORY / "README.md",
        *sorted((REPOSITORY / "docs").glob("*.md")),
        *sorted((REPOSITORY / "examples").rglob("*.py")),
    ]
    imported = {
        (source.relative_to(REPOSITORY).as_posix(), module)
        for source in sources
        for module in re.findall(
            r"^\s*(?:from|import) (livebridge[\w.]*)", source.read_text(), re.MULTILINE
        )
    }
    assert imported
    internal = sorted(
        f"{where}: {module}"
        for where, module in imported
        if module not in PUBLIC_MODULES and module not in DOCS_MAY_IMPORT
    )
    assert not internal, "import these from livebridge or a public module:\n" + "\n".join(internal)


def test_the_api_reference_documents_only_the_public_surface() -> None:
    """Every ``:::`` entry of docs/reference/ is a public module or a name one exports."""
    exported = {
        id(getattr(module, symbol))
        for name in PUBLIC_MODULES
        for module in [importlib.import_module(name)]
        for symbol in module.__all__
    }
    shown = [
        target
        for page in sorted((REPOSITORY / "docs" / "reference").glob("*.md"))
        for target in re.findall(r"^::: (\S+)", page.read_text(), re.MULTILINE)
    ]
    assert shown
    for target in shown:
        if target in PUBLIC_MODULES:
            continue
        home, _, symbol = target.rpartition(".")
        value = getattr(importlib.import_module(home), symbol, None)
        assert id(value) in exported, f"{target} is internal"


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
        for name in all_modules()
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
        "from livebridge import ToolCallSettled, TurnComplete, Closed, SessionEvent",
        "import livebridge.observe, livebridge.store, livebridge.phone, livebridge.recording",
        "from livebridge.observe import Observer, Recorder, CallSettled, LeaseChanged",
    ],
)
def test_light_imports_load_no_sdk_websockets_or_prometheus(statement: str) -> None:
    heavy = f"sorted(m for m in sys.modules if m.startswith({_HEAVY!r}))"
    probe = f"{statement}\nimport sys\nprint({heavy})"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "[]"
