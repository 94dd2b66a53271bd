"""The package's folders are its architecture: the import rules they stand for, checked."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "livebridge"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def load_time_imports(path: Path) -> set[str]:
    """The modules ``path`` imports when it is loaded (not those under TYPE_CHECKING or in a
    function, which cannot make an import cycle)."""
    found: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name in MODULES}


GRAPH = {name: load_time_imports(path) for name, path in MODULES.items()}


def test_no_import_cycle() -> None:
    assert GRAPH["livebridge.live.session"]  # the walk has edges to follow
    done: set[str] = set()

    def visit(name: str, trail: list[str]) -> None:
        if name in trail:
            pytest.fail("import cycle: " + " -> ".join([*trail[trail.index(name) :], name]))
        if name in done:
            return
        for imported in GRAPH[name]:
            if not name.startswith(imported + "."):  # a package's own __init__ runs first
                visit(imported, [*trail, name])
        done.add(name)

    for name in GRAPH:
        visit(name, [])


def test_the_command_line_is_the_top_floor() -> None:
    """Nothing in the library imports ``livebridge.cli``, and argparse lives only there."""
    for name, path in MODULES.items():
        if name.startswith("livebridge.cli") or name == "livebridge.__main__":
            continue
        source = path.read_text()
        assert "livebridge.cli" not in {m for m in GRAPH[name]}, name
        assert "import argparse" not in source, name
        assert "from livebridge.cli" not in source, name


def test_the_package_root_holds_few_modules() -> None:
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= 10, root


def folder_list(markdown: Path) -> str:
    """The ``livebridge/`` tree drawn in a page."""
    text = markdown.read_text()
    start = text.index("```\nlivebridge/\n") + 4
    return text[start : text.index("```", start)]


def test_the_readme_draws_every_folder_and_root_module() -> None:
    drawn = folder_list(PACKAGE.parent / "README.md")
    assert drawn == folder_list(PACKAGE.parent / "docs" / "architecture.md")
    names: list[str] = []
    stack: list[str] = []
    for line in drawn.splitlines()[1:]:
        depth = (len(line) - len(line.lstrip())) // 2
        entry = line.split()[0]
        if entry.endswith("/") or entry.endswith(".py"):
            stack[depth - 1 :] = [entry.rstrip("/")]
            names.append("/".join(stack))
    present = sorted(
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*")
        if p.name not in {"__init__.py", "__main__.py", "py.typed"}
        and "__pycache__" not in p.parts
        and (p.is_dir() or p.parent == PACKAGE or p.parent.name == "vendors")
        and (p.is_dir() is False or any(p.glob("*.py")))
    )
    assert sorted(names) == present


def test_the_tests_mirror_the_folders() -> None:
    tests = PACKAGE.parent / "tests"
    folders = {p.name for p in tests.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    package = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert package <= folders  # every concept has its tests' folder
    # the adapters, the browser example, and what the tests share (servers, clients, workers)
    assert folders - package == {"adapters", "voice_agent", "support"}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_outgrows_review(name: str) -> None:
    """A review mark, not a reason to cut a concept in two: past it, a module is read again."""
    lines = MODULES[name].read_text().count("\n")
    assert lines <= 800, f"{name} has {lines} lines: read it again for a second concept"
