"""Helpers for the what-if tests (no tests here): a run staged through the
recorder with tables, ops, row lineage and row rules written by hand, as a
capture writes them."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from provplug.ingest.recorder import StagedRun
from provplug.model import OpInfo, TableOrigin
from provplug.rowrules import ColumnRule, OpRowRules
from provplug.store.parquet import ParquetStore


@dataclasses.dataclass
class Table:
    name: str
    columns: Sequence[str]
    rows: Sequence[Sequence[Any]]
    types: Sequence[pa.DataType] | None = None


@dataclasses.dataclass
class Step:
    """An op: ``records`` as (out_row, member, input table name, in_row[, optional]);
    ``columns`` name -> rule with table *names*; ``deciding`` by input name."""

    name: str
    inputs: Sequence[str]
    output: str
    records: Sequence[tuple[Any, ...]]
    columns: Mapping[str, tuple[Any, ...]]
    deciding: Mapping[str, Sequence[str]] = dataclasses.field(default_factory=dict)
    existence: str = "exact"
    opaque_inputs: Sequence[str] = ()
    reason: str = ""
    row_lineage: bool = True


def stage(path: Path, tables: Sequence[Table], steps: Sequence[Step]) -> dict[str, int]:
    """Commit one run; return table name -> id."""
    store = ParquetStore(str(path))
    with store.transaction("capture") as txn:
        run = StagedRun(store, txn)
        infos = {}
        for t in tables:
            origin: TableOrigin = "output" if any(s.output == t.name for s in steps) else "source"
            infos[t.name] = run.new_table(t.name, origin, list(t.columns))
        tid = {name: info.table_id for name, info in infos.items()}
        for t in tables:
            arrays = [
                pa.array([r[i] for r in t.rows], type=t.types[i] if t.types else None) for i in range(len(t.columns))
            ]
            with run.rows_writer(tid[t.name]) as writer:
                writer.write(pa.Table.from_arrays(arrays, names=list(t.columns)), list(range(len(t.rows))))
            run.record_table(dataclasses.replace(infos[t.name], rows=len(t.rows), stored_rows=True))
        for s in steps:
            op = run.new_op_id()
            run.record_op(OpInfo(op, s.name, run.run_id, "builtin", tuple(tid[i] for i in s.inputs), (tid[s.output],)))
            if not s.row_lineage:
                continue
            if s.records:
                with run.row_lineage_writer() as writer:
                    rec = [(*r, False) if len(r) == 4 else r for r in s.records]
                    writer.write(
                        op,
                        tid[s.output],
                        [r[0] for r in rec],
                        [r[1] for r in rec],
                        [tid[r[2]] for r in rec],
                        [r[3] for r in rec],
                        [r[4] for r in rec],
                    )
            run.record_row_rules(
                OpRowRules(
                    op,
                    tid[s.output],
                    s.existence,  # type: ignore[arg-type]
                    {c: _rule(rule, tid) for c, rule in s.columns.items()},
                    {tid[t]: tuple(cols) for t, cols in s.deciding.items()},
                    tuple(tid[t] for t in s.opaque_inputs),
                    s.reason,
                )
            )
        run.finish()
    return tid


def _rule(spec: tuple[Any, ...], tid: Mapping[str, int]) -> ColumnRule:
    """("copy", T, C) | ("copies", [(T, C), ...]) (a union's copy per table) |
    ("aggregate", FN, T, C) | ("aggregate", "count_star") | ("computed", [(T, C), ...]) | ("literal",)."""
    kind = spec[0]
    if kind == "copies":
        return ColumnRule("copy", references=tuple((tid[t], c) for t, c in spec[1]))
    if kind == "copy":
        return ColumnRule("copy", tid[spec[1]], spec[2])
    if kind == "aggregate":
        if spec[1] == "count_star":
            return ColumnRule("aggregate", function="count_star")
        return ColumnRule("aggregate", tid[spec[2]], spec[3], spec[1])
    if kind == "computed":
        return ColumnRule("computed", references=tuple((tid[t], c) for t, c in spec[1]))
    return ColumnRule("literal")


PERSON1 = Table(
    "Person1",
    ("Name", "City", "Age"),
    [("Steve", "NY", 30), ("Mark", "NY", 40), ("Shane", "LA", 40), ("Mary", "NY", 20)],
)
PERSON2 = Table("Person2", ("Name", "City", "Age"), [("Steve", "NY", 30), ("Mark", "NY", 40), ("Shane", "LA", 40)])
AVGAGE = Table("AvgAge", ("City", "Age"), [("NY", 35.0), ("LA", 40.0)])
R1 = Step(
    "R1",
    ["Person1"],
    "Person2",
    [(0, 0, "Person1", 0), (1, 0, "Person1", 1), (2, 0, "Person1", 2)],
    {c: ("copy", "Person1", c) for c in ("Name", "City", "Age")},
    {"Person1": ["Age"]},
)
R2 = Step(
    "R2",
    ["Person2"],
    "AvgAge",
    [(0, 0, "Person2", 0), (0, 1, "Person2", 1), (1, 0, "Person2", 2)],
    {"City": ("copy", "Person2", "City"), "Age": ("aggregate", "avg", "Person2", "Age")},
    {"Person2": ["City"]},
)


def paper_store(path: Path) -> dict[str, int]:
    """The paper's running example with its row lineage written by hand."""
    return stage(path, [PERSON1, PERSON2, AVGAGE], [R1, R2])
