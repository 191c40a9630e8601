"""Splits of ``G_wf`` (paper §3): parsing, validation, completion, compilation.

The ``--splits`` JSON (and the answer of the ``provplug_choose_splits`` hook)
is a list of splits; a split is a list whose string items are table names and
whose list items are its sub-splits (recursively). A split's tables are all
names inside it at any depth. Example, the paper's Figure 1 shape::

    [["A", "B"], ["C", "D"], [["E", "F"], ["G"]]]

    sp1 = {A, B}, sp2 = {C, D}, sp3 = {E, F, G} with sub-splits {E, F}, {G}

Rules: every name is a table of the store and appears once in the whole
document; every split and sub-split is weakly connected in ``G_wf``.

Completion (so Algorithm 3 always knows where a value goes): tables named by
no top-level split are grouped into the weakly connected pieces of the rest
of ``G_wf``, one extra split each; in a split that has sub-splits, tables
named by none of them likewise become extra sub-splits.

Names: top-level splits are ``sp1``, ``sp2``, ... in document order (extra
ones after), sub-splits ``sp3.1``, ``sp3.2``, ...; they label the sets in
``sets.parquet``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from provplug.errors import SplitsError as SplitsError
from provplug.index.workflow import WorkflowGraph, weak_pieces


@dataclasses.dataclass(frozen=True)
class Split:
    name: str
    tables: tuple[str, ...]
    children: tuple[Split, ...] = ()

    def to_spec(self) -> list[Any]:
        """Back to the JSON shape (flat names for a leaf, sub-splits otherwise)."""
        if not self.children:
            return list(self.tables)
        return [c.to_spec() for c in self.children]

    def walk(self) -> list[Split]:
        return [self, *(d for c in self.children for d in c.walk())]


# -- parsing ----------------------------------------------------------------
def load_splits_file(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as exc:
        raise SplitsError(f"cannot read splits file {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise SplitsError(f"splits file {path} is not valid JSON: {exc.msg} (line {exc.lineno})") from exc


def check_names(spec: Any, known: Sequence[str]) -> None:
    """Shape, known names, no name twice: everything checkable without ``G_wf`` edges."""
    if not isinstance(spec, list) or not spec:
        raise SplitsError("splits must be a non-empty JSON list of splits (lists of table names)")
    seen: set[str] = set()
    known_set = set(known)

    def visit(node: Any, where: str) -> None:
        if not isinstance(node, list) or not node:
            raise SplitsError(f"{where} must be a non-empty list of table names or sub-splits, not {json.dumps(node)}")
        for item in node:
            if isinstance(item, list):
                visit(item, f"a sub-split of {where}")
            elif isinstance(item, str):
                if item not in known_set:
                    raise SplitsError(f"splits name unknown table {item!r} (tables: {', '.join(sorted(known_set))})")
                if item in seen:
                    raise SplitsError(f"splits overlap: table {item!r} appears more than once")
                seen.add(item)
            else:
                raise SplitsError(f"{where} holds {json.dumps(item)}, which is neither a table name nor a list")

    for i, split in enumerate(spec, 1):
        visit(split, f"split {i}")


def _names_in(node: list[Any]) -> list[str]:
    return [n for item in node for n in ([item] if isinstance(item, str) else _names_in(item))]


def build_splits(spec: Any, workflow: WorkflowGraph) -> list[Split]:
    """Validate ``spec`` against ``G_wf`` and return the completed split tree."""
    check_names(spec, workflow.tables)
    adj = workflow.neighbours()

    def make(node: list[Any], name: str) -> Split:
        tables = sorted(_names_in(node))
        if len(weak_pieces(set(tables), adj)) != 1:
            raise SplitsError(f"split {json.dumps(node)} is not weakly connected in the workflow graph")
        nested = [item for item in node if isinstance(item, list)]
        if not nested:
            return Split(name, tuple(tables))
        children = [make(sub, f"{name}.{i}") for i, sub in enumerate(nested, 1)]
        loose = set(tables) - {t for c in children for t in c.tables}
        children += _rest(loose, adj, name, len(children))
        return Split(name, tuple(tables), tuple(children))

    top = [make(split, f"sp{i}") for i, split in enumerate(spec, 1)]
    loose = set(workflow.tables) - {t for s in top for t in s.tables}
    return top + _rest(loose, adj, "sp", len(top), sep="")


def _rest(loose: set[str], adj: dict[str, set[str]], prefix: str, start: int, sep: str = ".") -> list[Split]:
    return [Split(f"{prefix}{sep}{start + i}", tuple(p)) for i, p in enumerate(weak_pieces(loose, adj), 1)]


def splits_to_spec(splits: Sequence[Split]) -> list[Any]:
    return [s.to_spec() for s in splits]


# -- compilation for the engines --------------------------------------------
@dataclasses.dataclass(frozen=True)
class CompiledSplits:
    """``paths[code, d]``: id of the depth-``d`` split holding table ``code``
    (-1 below its leaf); ``names[id]`` that split's name."""

    paths: np.ndarray
    names: tuple[str, ...]

    @property
    def depth(self) -> int:
        return int(self.paths.shape[1])


def compile_splits(splits: Sequence[Split], table_names: Sequence[str]) -> CompiledSplits:
    code = {n: i for i, n in enumerate(table_names)}
    names: list[str] = []
    rows: dict[int, list[int]] = {i: [] for i in range(len(table_names))}

    def visit(split: Split, depth: int) -> None:
        ident = len(names)
        names.append(split.name)
        for t in split.tables:
            path = rows[code[t]]
            path.extend([-1] * (depth + 1 - len(path)))
            path[depth] = ident
        for child in split.children:
            visit(child, depth + 1)

    for s in splits:
        visit(s, 0)
    depth = max((len(p) for p in rows.values()), default=1) or 1
    paths = np.full((max(len(table_names), 1), depth), -1, dtype=np.int32)
    for c, p in rows.items():
        paths[c, : len(p)] = p
    return CompiledSplits(paths, tuple(names))
