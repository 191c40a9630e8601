"""ZoomOut / ZoomIn (Lipstick §4.1) on lineage answers: a view, stored
triples never change.

A **module** is a named group of steps: the op parameter ``module`` (a Kedro
node's namespace, or ``with provplug.module(NAME):`` around decorated steps;
nested modules are dotted, ``outer.inner``). An op belongs to module ``M``
when its module is ``M`` or lies inside it (``M.…``). Per run, for ``M``:

- an **intermediate table** is written only by ops of ``M`` and read by at
  least one op, all of them ops of ``M``;
- an **output** is a table written by ``M`` and read by an op outside ``M``,
  or by none; an **input** is a table an op of ``M`` reads and ``M`` does not write.

``zoom_out(answer, M)`` removes the cells of ``M``'s intermediate tables and
contracts the triples through them: each path ``a -> x1 -> … -> b`` whose
inner cells were removed becomes one triple ``a -> b`` (an input cell
straight to an output cell), and every triple of an op of ``M`` is labelled
``M``. ``zoom_in`` is its exact inverse: the zoomed answer keeps the fine
one, and zooming in re-zooms that fine answer with the modules left.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from provplug import ids
from provplug.errors import LineageQueryError
from provplug.plugin.protocols import Store
from provplug.query.answer import LineageAnswer

EVERY_MODULE = "*"
OpKey = tuple[str, str]  # (run id, op name)


class Modules:
    """The modules of a store's runs: which op belongs to which, and which
    tables each op reads and writes."""

    def __init__(self, store: Store) -> None:
        self.op_module: dict[OpKey, str] = {}
        self.writers: dict[int, set[OpKey]] = defaultdict(set)
        self.readers: dict[int, set[OpKey]] = defaultdict(set)
        self.table_run = {t["table_id"]: t["run_id"] for t in store.tables().select(["table_id", "run_id"]).to_pylist()}
        for op in store.ops().select(["name", "run_id", "inputs", "outputs", "params"]).to_pylist():
            key = (op["run_id"], op["name"])
            module = json.loads(op["params"] or "{}").get("module")
            if isinstance(module, str) and module:
                self.op_module[key] = module
            for table in op["inputs"]:
                self.readers[table].add(key)
            for table in op["outputs"]:
                self.writers[table].add(key)

    def names(self) -> set[str]:
        """Every module and every module enclosing one (``a`` of ``a.b``)."""
        parts = (m.split(".") for m in self.op_module.values())
        return {".".join(p[:i]) for p in parts for i in range(1, len(p) + 1)}

    def outermost(self) -> set[str]:
        return {m.split(".")[0] for m in self.op_module.values()}

    def covering(self, op: OpKey, zoomed: set[str]) -> str | None:
        """The outermost zoomed module op ``op`` belongs to, if any."""
        module = self.op_module.get(op)
        if module is None:
            return None
        parts = module.split(".")
        return next((m for m in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if m in zoomed), None)

    def intermediate_tables(self, zoomed: set[str]) -> dict[int, str]:
        """Table id -> the zoomed module it is intermediate to."""
        found = {}
        for table, writers in self.writers.items():
            readers = self.readers.get(table, set())
            if not readers:
                continue  # read by nobody: an output
            owners = {self.covering(op, zoomed) for op in writers | readers}
            if len(owners) == 1 and None not in owners:
                found[table] = owners.pop()
        return found  # type: ignore[return-value]

    def op_of_edge(self, dst: int, op_name: str) -> OpKey | None:
        """The op that wrote ``dst`` (captured ids name their table, so their run)."""
        if not ids.is_packed(dst):
            return None
        run = self.table_run.get(dst >> ids.TABLE_SHIFT)
        return None if run is None else (run, op_name)


def chosen_modules(modules: Modules, names: Iterable[str]) -> set[str]:
    """``names`` checked against the store's modules (``*``: every outermost one)."""
    chosen: set[str] = set()
    known = modules.names()
    for name in names:
        if name == EVERY_MODULE:
            chosen |= modules.outermost()
        elif name in known:
            chosen.add(name)
        else:
            raise LineageQueryError(f"unknown module {name!r} (modules: {', '.join(sorted(known)) or 'none recorded'})")
    return chosen


def zoom_out(answer: LineageAnswer, modules: Modules, names: Iterable[str]) -> LineageAnswer:
    """``answer`` seen with the modules ``names`` (and those it was already
    zoomed out of) as single steps."""
    fine = answer.fine or answer
    zoomed = set(answer.zoomed) | chosen_modules(modules, names)
    if not zoomed:
        return answer
    hidden = modules.intermediate_tables(zoomed)
    removed = {r["value_id"] for r in fine.lineage if _table(r["value_id"]) in hidden}
    inside = [q for q in fine.query if _table(q["value_id"]) in hidden]
    if inside:
        table = hidden[_table(inside[0]["value_id"])]
        raise LineageQueryError(
            f"the queried {inside[0]['table']} lies inside module {table!r} (an intermediate table): "
            f"zoom out of it to query its inputs or outputs instead"
        )
    return replace(
        fine,
        lineage=[r for r in fine.lineage if r["value_id"] not in removed],
        edges=_contracted(fine.edges, removed, modules, zoomed),
        stats={**fine.stats, "zoom_out": sorted(zoomed)},
        fine=fine,
        zoomed=tuple(sorted(zoomed)),
    )


def zoom_in(answer: LineageAnswer, modules: Modules, names: Iterable[str]) -> LineageAnswer:
    """The inverse of :func:`zoom_out`: ``answer`` with the modules ``names``
    (``*``: all) seen step by step again."""
    names = list(names)
    if not answer.zoomed:
        if "zoom_out" in answer.stats:
            raise LineageQueryError(
                "this answer was read back without its fine-grained triples: query again to zoom in"
            )
        return answer
    assert answer.fine is not None
    zoomed = set(answer.zoomed)
    chosen = zoomed if EVERY_MODULE in names else set(names)
    unknown = chosen - zoomed
    if unknown:
        raise LineageQueryError(
            f"module {sorted(unknown)[0]!r} is not zoomed out (zoomed out: {', '.join(sorted(zoomed))})"
        )
    left = zoomed - chosen
    return zoom_out(answer.fine, modules, left) if left else answer.fine


def _table(value_id: int) -> int:
    return value_id >> ids.TABLE_SHIFT if ids.is_packed(value_id) else -1


def _contracted(
    edges: list[dict[str, Any]], removed: set[int], modules: Modules, zoomed: set[str]
) -> list[dict[str, Any]]:
    """The triples among kept cells, with paths through removed cells made
    one triple, labelled by the zoomed module of their op."""

    def label(e: dict[str, Any]) -> str:
        op = modules.op_of_edge(e["dst"], e["op"])
        return (modules.covering(op, zoomed) if op else None) or e["op"]

    parents: dict[int, list[int]] = defaultdict(list)
    for e in edges:
        parents[e["dst"]].append(e["src"])
    out: dict[tuple[int, int, str], None] = {}
    for e in edges:
        if e["dst"] in removed:
            continue
        sources = _kept_through(e["src"], parents, removed) if e["src"] in removed else [e["src"]]
        for src in sources:
            out[(src, e["dst"], label(e))] = None
    return [{"src": s, "dst": d, "op": op} for s, d, op in out]


def _kept_through(start: int, parents: dict[int, list[int]], removed: set[int]) -> list[int]:
    """The kept cells reached from removed cell ``start`` upwards through removed cells only."""
    seen, stack, kept = {start}, [start], []
    while stack:
        for parent in parents.get(stack.pop(), []):
            if parent in seen:
                continue
            seen.add(parent)
            if parent in removed:
                stack.append(parent)
            else:
                kept.append(parent)
    return sorted(kept)
