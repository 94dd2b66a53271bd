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


def folder_list(markdown: Path) -> str:
    """The ``livebridge/`` tree drawn in a page."""
    text = markdown.read_text()
    start = text.index("```\nlivebridge/\n") + 4
    return text[start : text.index("```", start)]


def drawn_layers() -> list[str]:
    """The drawing's entries, top to bottom: ``cli``, ..., ``vendors.openai_live``, ...,
    ``errors`` (folders and root modules, with the vendors' own folders in their order)."""
    layers: list[str] = []
    for line in folder_list(PACKAGE.parent / "docs" / "architecture.md").splitlines()[1:]:
        depth = (len(line) - len(line.lstrip())) // 2
        entry = line.split()[0] if line.strip() else ""
        if not (entry.endswith("/") or entry.endswith(".py")):
            continue  # a description's second line
        name = entry.removesuffix("/").removesuffix(".py")
        if depth == 1:
            layers.append(name)
        elif layers[-1].split(".")[0] == "vendors":
            layers.append("vendors." + name)
    return layers


LAYERS = drawn_layers()


def layer_of(module: str) -> int | None:
    """Where ``module`` sits in the drawing (None for the package itself and ``__main__``):
    a vendor's folder is its own layer, every other sub-folder belongs to its folder's."""
    parts = module.split(".")[1:]
    if not parts or parts[0] == "__main__":
        return None
    if parts[0] == "vendors" and len(parts) > 1 and "vendors." + parts[1] in LAYERS:
        return LAYERS.index("vendors." + parts[1])
    return LAYERS.index(parts[0])


#: The imports that reach up the drawing, each from inside a function, for an optional part
#: (docs/architecture.md names them). Loading the lower module never loads the upper one.
LAZY_UPWARD = {
    ("livebridge.calls.tools", "livebridge.mcp.tools"),  # ToolRegistry.add_mcp
    ("livebridge.calls.tools", "livebridge.mcp.server"),  # its annotation (TYPE_CHECKING)
    # Tool.declaration, ToolRegistry.declarations: Gemini's shape, built in its folder
    ("livebridge.calls.tools", "livebridge.vendors.gemini.declarations"),
    ("livebridge.observe.metrics", "livebridge.mcp.metrics"),  # the MCP connections' collector
    ("livebridge.recording.replay", "livebridge.emulator"),  # assert_replays
    ("livebridge.recording.replay", "livebridge.live.options"),
    ("livebridge.recording.replay", "livebridge.live.session"),
}


def every_import(path: Path) -> set[str]:
    """Every livebridge module ``path`` names in an import, wherever the import is."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return {name for name in found if name.startswith("livebridge.")}


def test_the_drawing_names_every_folder_once() -> None:
    assert LAYERS[0] == "cli" and LAYERS[-1] == "errors"
    assert len(set(LAYERS)) == len(LAYERS)
    for name in MODULES:
        layer_of(name)  # raises ValueError for a module the drawing does not place


def test_imports_at_load_time_point_down_the_drawing() -> None:
    """Every import a module makes when it is loaded stays in its layer or goes below it."""
    upward = [
        f"{name} -> {imported} ({LAYERS[layer_of(name) or 0]} imports "
        f"{LAYERS[layer_of(imported) or 0]})"
        for name, imported_set in GRAPH.items()
        for imported in imported_set
        if (here := layer_of(name)) is not None
        and (there := layer_of(imported)) is not None
        and there < here
    ]
    assert not upward, "imports against docs/architecture.md:\n" + "\n".join(sorted(upward))


def test_only_the_named_lazy_imports_reach_up() -> None:
    """Inside functions too, nothing reaches up but the few optional parts the page names."""
    upward = {
        (name, imported)
        for name, path in MODULES.items()
        for imported in every_import(path)
        if (here := layer_of(name)) is not None
        and (there := layer_of(imported)) is not None
        and there < here
    }
    assert upward == LAZY_UPWARD


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
    assert lines <= 1000, f"{name} has {lines} lines: read it again for a second concept"
