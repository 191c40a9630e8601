"""The shape of the code: no import cycle, markers apart, adapters through the recorder.

The import graph is read from the source with :mod:`ast`, never by importing
it, over every module of ``provplug`` and of the built-in adapters
(``provplug_spark``, ``provplug_beam``, ``provplug_kedro``). What counts as an import:

* every import executed when the module is imported (module level, inside
  ``try``/``if`` blocks and class bodies), and
* every import under ``if TYPE_CHECKING:`` — a cycle that only type checkers
  follow still makes two modules impossible to read, test or move apart.

Imports inside a function body are *not* counted: they run on the call,
after every module involved is loaded, and are the deliberate way to
import an optional heavy dependency late (pyspark, apache_beam) or to call
from one layer into a higher one at run time. The test does report them
separately (``test_function_local_imports_close_no_cycle_either``), so a
lazy import that only hides a knot is seen too.

Edges: ``import a.b`` and ``from a import b`` (``b`` a module) lead to that
module; ``from a.b import name`` leads to ``a.b``. Importing a submodule
does not add an edge to its parent package's ``__init__`` (Python runs it
first, but a package importing its own submodules is the normal way to
re-export them and is no knot).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from conftest import REPO

PACKAGES = {
    "provplug": REPO,
    "provplug_spark": REPO / "adapters" / "spark",
    "provplug_beam": REPO / "adapters" / "beam",
    "provplug_kedro": REPO / "adapters" / "kedro",
}


def _modules() -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is a package ``__init__``)."""
    found = {}
    for package, base in PACKAGES.items():
        for path in sorted((base / package).rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


MODULES = _modules()


def _known(name: str) -> str | None:
    """``name`` or its nearest enclosing module among MODULES (None: outside)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, *, function_local: bool) -> set[str]:
    """The modules of MODULES that ``module`` imports (see the module docstring)."""
    path, is_package = MODULES[module]
    package = module if is_package else module.rpartition(".")[0]
    targets: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and not function_local:
                continue
            if isinstance(child, ast.Import):
                targets.update(t for a in child.names if (t := _known(a.name)))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - child.level + 1]
                    source = ".".join([*base, *([child.module] if child.module else [])])
                else:
                    source = child.module or ""
                for alias in child.names:
                    submodule = f"{source}.{alias.name}"
                    target = submodule if submodule in MODULES else _known(source)
                    if target:
                        targets.add(target)
            visit(child)

    visit(ast.parse(path.read_text(), filename=str(path)))
    targets.discard(module)
    return targets


def import_graph(*, function_local: bool = False) -> dict[str, set[str]]:
    return {module: _imports(module, function_local=function_local) for module in MODULES}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other (strongly connected
    components of more than one module), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan
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
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return groups


def _shortest_cycle(graph: dict[str, set[str]], starts: set[str], group: set[str]) -> list[str]:
    """The shortest cycle within ``group`` through one of ``starts`` (breadth first)."""
    best: list[str] = []
    for start in sorted(starts):
        paths = {start: [start]}
        frontier = [start]
        while frontier:
            nxt = []
            for v in frontier:
                for w in sorted(graph[v] & group):
                    if w == start and (not best or len(paths[v]) + 1 < len(best)):
                        best = [*paths[v], start]
                    if w not in paths:
                        paths[w] = [*paths[v], w]
                        nxt.append(w)
            frontier = nxt
    return best


def _describe(graph: dict[str, set[str]], found: list[list[str]]) -> str:
    """Each group of modules in a cycle, and its shortest cycles through each member."""
    lines = ["import cycles:"]
    for group in found:
        lines.append(f"  among {', '.join(group)}:")
        shortest = {" -> ".join(_shortest_cycle(graph, {m}, set(group))) for m in group}
        lines.extend(f"    {c}" for c in sorted(shortest, key=lambda c: (c.count("->"), c)))
    return "\n".join(lines)


def test_the_graph_sees_type_checking_and_relative_imports() -> None:
    """The reader itself: a TYPE_CHECKING import, a relative one and a
    package-level ``from . import module`` all become edges."""
    graph = import_graph()
    assert "provplug.model" in graph["provplug.plugin.hookspecs"]  # under TYPE_CHECKING
    assert "provplug.plugin.markers" in graph["provplug.plugin.hookspecs"]
    assert "provplug.plugin.hookspecs" in graph["provplug.plugin.manager"]  # from . import hookspecs
    assert "provplug.ingest.capture" in graph["provplug"]
    assert "provplug.plugin.manager" not in graph["provplug.store.parquet"]  # only inside a function, if at all


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert _shortest_cycle(graph, {"a"}, {"a", "b", "c"}) == ["a", "b", "c", "a"]
    assert "a -> b -> c -> a" in _describe(graph, cycles(graph))


def test_no_import_cycle_type_checking_imports_included() -> None:
    graph = import_graph()
    found = cycles(graph)
    assert not found, _describe(graph, found)


def test_no_import_cycle_among_the_core_modules() -> None:
    """The modules of the plugin contract never import back into each other,
    whatever the rest of the package does."""
    core = {
        f"provplug.{m}"
        for m in (
            "plugin.markers",
            "plugin.hookspecs",
            "plugin.protocols",
            "plugin.manager",
            "ingest.capture",
            "ingest.transaction",
            "ingest.recorder",
            "plugin.writers",
            "model",
            "errors",
            "ids",
            "schema",
            "rowrules",
        )
    }
    graph = import_graph()
    core_graph = {m: graph[m] & core for m in core}
    found = cycles(core_graph)
    assert not found, _describe(core_graph, found)
    for module in core:
        assert not graph[module] & {"provplug.store.parquet", "provplug.ingest.importer"}, module
    # The protocols sit at the bottom: any layer can name them (model and rowrules are plain data).
    assert graph["provplug.plugin.protocols"] <= {
        "provplug.model",
        "provplug.rowrules",
        "provplug.plugin.writers",
        "provplug.plugin.query_results",
    }


def test_function_local_imports_close_no_cycle_either() -> None:
    graph = import_graph(function_local=True)
    found = cycles(graph)
    assert not found, _describe(graph, found)


def test_markers_import_only_pluggy() -> None:
    tree = ast.parse((REPO / "provplug" / "plugin" / "markers.py").read_text())
    imported = {
        (n.module if isinstance(n, ast.ImportFrom) else a.name)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names
    }
    assert imported == {"__future__", "pluggy"}


def test_public_names_keep_working() -> None:
    import provplug
    from provplug.plugin import hookspecs, markers

    assert provplug.hookimpl is markers.hookimpl is hookspecs.hookimpl
    assert callable(provplug.open_store) and callable(provplug.capture) and callable(provplug.step)


def test_the_run_and_the_store_implement_their_protocols(store_path: Path) -> None:
    from provplug.ingest.capture import ActiveRun
    from provplug.plugin.protocols import RunRecorder, Store
    from provplug.store.parquet import ParquetStore

    assert isinstance(ParquetStore(str(store_path)), Store)
    assert all(hasattr(ActiveRun, m) for m in dir(RunRecorder) if not m.startswith("_"))


def test_the_index_workflow_graph_is_a_workflow_graph() -> None:
    from provplug.index.workflow import WorkflowGraph as IndexGraph
    from provplug.plugin.protocols import WorkflowGraph

    graph = IndexGraph(("A", "B"), (("A", "B"),))
    members = [m for m in dir(WorkflowGraph) if not m.startswith("_")]
    assert members and all(hasattr(graph, m) for m in members)


# Touching a run's transaction, the store's filesystem or a Parquet writer.
_STORE_INTERNALS = re.compile(
    r"\.txn\b|store\.fs\b|\bpq\.write_table\b|ParquetWriter|provplug\.store\.parquet\b|\bParquetStore\b"
)


def _adapter_sources() -> Iterator[Path]:
    for folder in (REPO / "adapters", REPO / "examples"):
        yield from sorted(p for p in folder.rglob("*.py") if "benchmarks" not in p.parts)


def test_adapters_reach_the_store_only_through_the_recorder() -> None:
    offending = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for path in _adapter_sources()
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if _STORE_INTERNALS.search(line)
    ]
    assert not offending, "\n".join(offending)


def test_the_layer_contracts_hold() -> None:
    """import-linter's contracts in pyproject.toml (the layers of
    docs/architecture.md, the leaf modules, no adapter imported by provplug)
    hold for every import, function-local and TYPE_CHECKING ones included."""
    import subprocess
    import sys

    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert done.stdout.count(" KEPT") == 3, done.stdout


def test_a_layer_violation_is_caught(tmp_path: Path) -> None:
    """The contract is not vacuous: a store module importing the query layer breaks it."""
    import shutil
    import subprocess
    import sys

    copy = tmp_path / "repo"
    shutil.copytree(REPO / "provplug", copy / "provplug")
    for adapter in ("spark", "beam", "kedro"):
        shutil.copytree(REPO / "adapters" / adapter / f"provplug_{adapter}", copy / f"provplug_{adapter}")
    shutil.copy(REPO / "pyproject.toml", copy / "pyproject.toml")
    runs = copy / "provplug" / "store" / "runs.py"
    runs.write_text(
        runs.read_text() + "\n\ndef _late() -> None:\n    from provplug.query import answer  # noqa: F401\n"
    )
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint), "--no-cache"],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert "provplug.store is not allowed to import provplug.query" in done.stdout
