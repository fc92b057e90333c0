"""The package's layout is the pipeline: layers that import only downwards, no circles,
functions that fit on a screen or two, and a CONTRIBUTING map that lists every module.

These read the source (``ast``), so they are exact and fast; they fail with the import,
the function or the module that breaks the rule.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

import pytest_kafka_mirror

PKG_DIR = Path(pytest_kafka_mirror.__file__).parent
PKG = PKG_DIR.name
ROOT = PKG_DIR.parent

#: Low to high: a module may import its own layer and the layers before it, never after.
#: The first entry are leaves every stage shares (the run directory contract, the warning
#: class, librdkafka logging, the hook specs); the last is the pytest layer and the CLI.
LAYERS: list[set[str]] = [
    {"rundir", "_warnings", "_kafkalog", "_clientconf", "hookspec"},
    {"processes"},
    {"clusters"},
    {"produce"},
    {"capture"},
    {"replicators"},
    {"faults"},
    {"verify"},
    {"report"},
    {"", "run", "provisioning", "env", "session", "facades", "results", "config", "plugin", "cli"},
]
#: Longest function allowed (lines, decorators excluded).  A longer one must say on its
#: ``def`` line why it is written out (``# hot loop: ...``).
MAX_FUNCTION_LINES = 120


def _modules() -> dict[str, tuple[Path, bool]]:
    mods = {}
    for path in PKG_DIR.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        mods[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return mods


def _imports_of(source: str, mod: str, is_pkg: bool, mods: Iterable[str]) -> set[str]:
    """The modules of ``mods`` that the module ``mod`` (its ``source``) imports: at the top,
    in functions, and under ``if TYPE_CHECKING:`` too.  A types-only import is still a
    dependency a reader follows (and a static import reader draws), so it obeys the layers
    and closes circles like any other; none is needed upward today, so there is no exception."""
    known = set(mods)
    deps: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                deps.add(sub if sub in known else target)
        elif isinstance(node, ast.Import):
            deps.update(a.name for a in node.names)
    return {d for d in deps if d in known and d != mod}


def _imports() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (see :func:`_imports_of`)."""
    mods = _modules()
    return {mod: _imports_of(path.read_text(), mod, is_pkg, mods) for mod, (path, is_pkg) in mods.items()}


def test_types_only_imports_count() -> None:
    source = ("from typing import TYPE_CHECKING\n"
              "if TYPE_CHECKING:\n    from ..session import KafkaMirrorSession\n"
              "def f():\n    from .storage import TestResult\n")
    mods = {f"{PKG}.session", f"{PKG}.report.storage", f"{PKG}.report.summary"}
    assert _imports_of(source, f"{PKG}.report.summary", False, mods) == {f"{PKG}.session", f"{PKG}.report.storage"}


def _layer(mod: str) -> int:
    top = mod[len(PKG) + 1:].split(".")[0] if mod != PKG else ""
    for i, layer in enumerate(LAYERS):
        if top in layer:
            return i
    raise AssertionError(f"{mod} is in no layer: add its package to LAYERS in {__file__}")


def test_every_module_is_in_a_layer() -> None:
    for mod in _modules():
        _layer(mod)


def test_lower_layers_never_import_upper_ones() -> None:
    upward = [f"{m} imports {d}" for m, deps in _imports().items() for d in deps if _layer(d) > _layer(m)]
    assert upward == []


def test_there_are_no_import_circles() -> None:
    graph = _imports()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    assert circles == []


def test_no_function_is_longer_than_two_screens() -> None:
    long = []
    for path, _ in _modules().values():
        source = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(source))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES and "# hot loop:" not in source[node.lineno - 1]:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {n} lines")
    assert long == []


def test_the_package_root_holds_only_the_pytest_layer_and_shared_leaves() -> None:
    root_modules = {p.stem for p in PKG_DIR.glob("*.py")} - {"__init__"}
    assert root_modules <= LAYERS[0] | LAYERS[-1], sorted(root_modules - (LAYERS[0] | LAYERS[-1]))


def test_contributing_maps_every_module() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text()
    table = text[text.index("## Where things live"):]
    table = table.split("\n## ")[0]
    named = set(re.findall(r"`([\w/]+(?:\.py|/))`", table))
    missing = []
    for path, _ in _modules().values():
        rel = path.relative_to(PKG_DIR)
        if rel.name in ("__init__.py", "__main__.py"):
            continue
        # A module is named by its path in the package ("verify/job.py") or, inside a
        # package's row, by its file name alone ("job.py").
        if str(rel) not in named and rel.name not in named:
            missing.append(str(rel))
    assert missing == [], "CONTRIBUTING's 'Where things live' does not name these modules"
