"""The workflow of a store as ``provplug graph`` and the explorer show it:
the inferred workflow graph ``G_wf`` as data, text or a Graphviz picture — tables with their row counts, ops with their triple
counts, an arrow from each table an op read to the op and from the op to
each table it wrote.

An op's tables come from the capture metadata (its inputs and outputs) and
from its triples' source and destination tables (the only source for
imported ops, which carry no tables), as in :mod:`provplug.index.workflow`.
Tables and ops are named as the index names them (a table is its name
across runs); ``--run`` draws one run only.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from provplug.store.catalogue import StoreCatalogue

if TYPE_CHECKING:
    from provplug.plugin.protocols import Store

FORMATS = ("text", "svg", "html", "dot")


@dataclass
class Workflow:
    """Tables (rows per run that wrote one), ops (triples), and which tables
    each op read and wrote (with the triples per table when known)."""

    tables: dict[str, list[int | None]] = field(default_factory=lambda: defaultdict(list))
    op_triples: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    op_runs: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    reads: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))  # (table, op) -> triples
    writes: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))  # (op, table) -> triples

    def rows_text(self, table: str) -> str:
        counts = self.tables.get(table, [])
        known = [n for n in counts if n is not None]
        if not known:
            return "rows unknown"
        if len(counts) == 1:
            return f"{known[0]:,} rows"
        return f"{len(counts)} runs: " + ", ".join(f"{n:,}" for n in known) + " rows"


def workflow_of(store: Store, run: str | None = None) -> Workflow:
    """The workflow of ``store`` (of run ``run`` only, when given: a number,
    ``latest``, ``latest~N``, a label or an id prefix), from the store's one
    catalogue (:class:`~provplug.store.catalogue.StoreCatalogue`)."""
    catalogue = StoreCatalogue.of(store)
    if run is not None:
        run = str(catalogue.run(run)["run_id"])
    runs = None if run is None else {run}
    wf = Workflow()
    name_of: dict[int, str] = {}
    for t in catalogue.tables_of(runs):
        name_of[t.table_id] = t.name
        wf.tables[t.name].append(t.rows)
    op_name: dict[int, str] = {}
    for o in catalogue.ops_of(runs):
        op_name[int(o["op_id"])] = o["name"]
        wf.op_runs[o["name"]].add(o["run_id"])
        wf.op_triples.setdefault(o["name"], 0)
        for i in o["inputs"] or ():
            if int(i) in name_of:
                wf.reads.setdefault((name_of[int(i)], o["name"]), 0)
        for out in o["outputs"] or ():
            if int(out) in name_of:
                wf.writes.setdefault((o["name"], name_of[int(out)]), 0)
    for op_id, src_table, dst_table, n in _triple_counts(store, run):
        name = op_name.get(op_id, str(op_id))
        wf.op_triples[name] += n
        wf.reads[(name_of.get(src_table, str(src_table)), name)] += n
        wf.writes[(name, name_of.get(dst_table, str(dst_table)))] += n
    return wf


def _triple_counts(store: Store, run: str | None) -> list[tuple[int, int, int, int]]:
    """``(op, src_table, dst_table, triples)`` over the committed triples (of
    ``run``), stored or stood for by location edges (counted, not expanded)."""
    from provplug.store.triples import EVERYTHING, TripleFilter, triple_counts

    where = EVERYTHING if run is None else TripleFilter.of(runs=[run])
    return [(op, src, dst, n) for (op, src, dst), n in sorted(triple_counts(store, where).items())]


def _op_label(wf: Workflow, op: str) -> str:
    runs = len(wf.op_runs.get(op, ()))
    return f"{op}{f' ({runs} runs)' if runs > 1 else ''}\n{wf.op_triples.get(op, 0):,} triples"


def as_text(wf: Workflow) -> str:
    lines = [f"{len(wf.tables)} tables, {len(wf.op_triples)} ops, {sum(wf.op_triples.values()):,} triples"]
    lines.extend(f"table {t}: {wf.rows_text(t)}" for t in sorted(wf.tables))
    for op in sorted(wf.op_triples):
        ins = ", ".join(sorted(t for t, o in wf.reads if o == op)) or "-"
        outs = ", ".join(sorted(t for o, t in wf.writes if o == op)) or "-"
        lines.append(f"op {_op_label(wf, op).replace(chr(10), ': ')}: {ins} -> {outs}")
    return "\n".join(lines)


def as_graph(wf: Workflow, title: str) -> Any:
    from provplug.query.picture import new_digraph

    graph = new_digraph(title)
    for i, table in enumerate(sorted(wf.tables)):
        graph.node(f"t{i}", label=f"{table}\n{wf.rows_text(table)}", shape="box", style="filled", fillcolor="#d6e9ff")
    node = {t: f"t{i}" for i, t in enumerate(sorted(wf.tables))}
    for i, op in enumerate(sorted(wf.op_triples)):
        node[f"op:{op}"] = f"o{i}"
        graph.node(f"o{i}", label=_op_label(wf, op), shape="ellipse", style="filled", fillcolor="#fff2a8")
    for (table, op), n in sorted(wf.reads.items()):
        several = sum(1 for _, o in wf.reads if o == op) > 1
        graph.edge(node.setdefault(table, table), node[f"op:{op}"], label=f"{n:,}" if several and n else "")
    for (op, table), n in sorted(wf.writes.items()):
        several = sum(1 for o, _ in wf.writes if o == op) > 1
        graph.edge(node[f"op:{op}"], node.setdefault(table, table), label=f"{n:,}" if several and n else "")
    return graph


LEGEND = (
    "Blue boxes are tables with their row counts; yellow ellipses are ops with the triples they "
    "produced; arrows go from the tables an op read to the op and on to the tables it wrote "
    "(labelled with triples when an op has several)."
)
