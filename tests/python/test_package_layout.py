"""The ``aic`` package has no circular imports between its modules (issue 35).

Every module of the package is parsed with ``ast`` (nothing is imported); each ``import`` and
``from ... import`` statement, at module level or inside a function, relative or absolute, is an
edge to the module it names (``from pkg import name`` names ``pkg.name`` when that is a module,
else ``pkg``), and so is ``importlib.import_module`` with a literal string. Imports under
``if TYPE_CHECKING:`` never run and are left out; so are the parent packages Python imports
implicitly before a submodule. Any strongly connected set of more than one module is a circle,
reported as one concrete path.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import aic

PACKAGE = "aic"
PACKAGE_DIR = Path(aic.__file__).resolve().parent
#: ``aic/data`` is the shipped data (a symlink to the repo's ``data/`` in a checkout), not code.
NOT_CODE = {"data", "__pycache__"}


def package_modules(root: Path, package: str = PACKAGE) -> dict[str, Path]:
    """``dotted name -> file`` for every ``.py`` module under ``root`` (a package's
    ``__init__.py`` is the package's own name) and every compiled module with a ``.pyi`` stub
    (``aic._aic``: it imports nothing of the package)."""
    modules = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in NOT_CODE)
        rel = Path(folder).relative_to(root).parts
        for name in files:
            stem, _, suffix = name.partition(".")
            if suffix not in ("py", "pyi"):
                continue
            parts = [package, *rel] + ([] if stem == "__init__" else [stem])
            modules.setdefault(".".join(parts), Path(folder) / name)
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_nodes(tree: ast.AST):
    """Every node of ``tree`` except the bodies of ``if TYPE_CHECKING:`` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """``name`` or its longest prefix that is a module of the package."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``module`` imports (see the module docstring)."""
    is_package = path.name == "__init__.py"
    if path.suffix == ".pyi":
        return set()
    targets = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets.update(_known(alias.name, modules) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = module.split(".")
                if not is_package:
                    base_parts = base_parts[:-1]
                base_parts = base_parts[:len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                full = f"{base}.{alias.name}"
                targets.add(full if full in modules else _known(base, modules))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            targets.add(_known(node.args[0].value, modules))
    targets.discard(None)
    targets.discard(module)
    return targets  # type: ignore[return-value]


def import_graph(root: Path = PACKAGE_DIR) -> dict[str, set[str]]:
    modules = package_modules(root)
    return {name: imports_of(name, path, modules) for name, path in sorted(modules.items())}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One concrete circle (``a -> b -> ... -> a``) per strongly connected set of modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def connect(v: str) -> None:  # Tarjan; the package is small enough for recursion
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(set(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return [_path_through(graph, component) for component in components]


def _path_through(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest circle through the component's first module (breadth-first)."""
    start = min(component)
    previous = {start: start}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & component):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [*reversed(path), start]
            if w not in previous:
                previous[w] = v
                queue.append(w)
    raise AssertionError(f"no circle through {start} in {sorted(component)}")


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_the_import_graph_sees_every_kind_of_import(tmp_path):
    root = _write(tmp_path / "aic", {
        "__init__.py": "",
        "base.py": "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from .top import Thing\n",
        "top.py": "import aic.base\n",
        "_ext.pyi": "from aic.top import x\n",
        "sub/__init__.py": "from .one import f\n",
        "sub/one.py": "def f():\n    from .. import base, _ext\n    from ..sub import two\n",
        "sub/two.py": "import importlib\nimportlib.import_module('aic.top')\nfrom aic.sub.one import f\n",
        "data/skipped.py": "import aic.top\n",
    })
    assert import_graph(root) == {
        "aic": set(),
        "aic.base": set(),  # the TYPE_CHECKING import never runs
        "aic._ext": set(),  # a compiled module (its stub's imports are for type checkers)
        "aic.top": {"aic.base"},  # absolute
        "aic.sub": {"aic.sub.one"},  # a package naming its own module
        "aic.sub.one": {"aic.base", "aic._ext", "aic.sub.two"},  # function level, relative
        "aic.sub.two": {"aic.top", "aic.sub.one"},  # importlib literal, absolute from-import
    }
    assert circles(import_graph(root)) == [["aic.sub.one", "aic.sub.two", "aic.sub.one"]]


def test_circles_are_found_and_named():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert circles(graph) == [["a", "b", "c", "a"]]
    assert circles({"x": {"y"}, "y": set()}) == []


def test_no_module_imports_its_importer():
    found = circles(import_graph())
    assert not found, "circular imports in the aic package: " + "; ".join(
        " -> ".join(path) for path in found)


def test_documented_import_paths_still_work():
    """README.md documents these paths; the modules behind them moved into subpackages."""
    import aic.serving
    import aic.serving.sweep
    import aic.serving_sweep
    from aic.cli import main

    assert aic.serving_sweep.sweep is aic.serving.sweep.sweep
    assert callable(aic.serving.estimate) and issubclass(aic.serving.NoFeasibleConfigError,
                                                         RuntimeError)
    assert callable(aic.compile_engine) and callable(aic.estimate_kv_cache)
    assert main.name == "main" and callable(main)
