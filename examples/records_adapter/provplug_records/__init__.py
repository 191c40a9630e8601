"""An example third-party capture adapter: pipelines over lists of dicts.

A step takes one ``Records`` and returns a list of dicts, row ``i`` of the
output made from row ``i`` of the input by an opaque function, so the black-box
rule applies: every output cell of row ``i`` <- every input cell of row ``i``.
It exists to show (and test) how an adapter plugs into provplug.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import provplug
from provplug import ids, schema
from provplug.model import OpInfo, StepInfo, TableInfo

EVENTS: list[tuple[str, str]] = []  # (hook, detail): what this plugin observed


class RecordsEngine:
    """Marker object: ``provplug.capture(RecordsEngine(), store=...)``."""


@dataclass
class Records:
    rows: list[dict[str, Any]]
    table: TableInfo


class RecordsAdapter:
    name = "records"

    def accepts(self, engine: object) -> bool:
        return isinstance(engine, RecordsEngine)

    def open(self, engine: object, run: Any) -> RecordsSession:
        return RecordsSession(run)


class RecordsSession:
    def __init__(self, run: Any) -> None:
        self.run = run

    def source(self, data: list[dict[str, Any]], name: str) -> Records:
        return self._write_table(name, "source", data)

    def run_step(self, step: StepInfo, func: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> Records:
        (source,) = [a for a in args if isinstance(a, Records)]
        started = dt.datetime.now(dt.timezone.utc)
        rows = func(*args, **kwargs)
        out = self._write_table(step.outputs[0], "output", rows)
        op_id = self.run.new_op_id()
        triples = self._write_triples(op_id, source, out)
        self.run.record_op(
            OpInfo(op_id, step.name, self.run.run_id, "udf", (source.table.table_id,), (out.table.table_id,),
                   ("map",), step.params, started, dt.datetime.now(dt.timezone.utc), triples)
        )
        return out

    def close(self, error: BaseException | None) -> None:
        EVENTS.append(("session_closed", "error" if error else "ok"))

    def _write_table(self, name: str, origin: Any, rows: list[dict[str, Any]]) -> Records:
        columns = list(rows[0]) if rows else []
        table = self.run.new_table(name, origin, columns)
        table = TableInfo(table.table_id, name, self.run.run_id, origin, tuple(columns), len(rows), True)
        data = pa.Table.from_pylist([{**r, schema.ROW_COLUMN: i} for i, r in enumerate(rows)])
        self.run.txn.store.fs.create_dir(self.run.txn.path("rows", str(table.table_id)))
        pq.write_table(data, self.run.txn.path("rows", str(table.table_id), "part-0.parquet"))
        self.run.mark_dataset("rows")
        self.run.record_table(table)
        return Records(rows, table)

    def _write_triples(self, op_id: int, src: Records, dst: Records) -> int:
        t_in, t_out = src.table, dst.table
        edges = [
            (ids.value_id(t_in.table_id, ci, r), ids.value_id(t_out.table_id, co, r))
            for r in range(min(len(src.rows), len(dst.rows)))
            for ci in range(len(t_in.columns))
            for co in range(len(t_out.columns))
        ]
        table = pa.table(
            {
                "src": [e[0] for e in edges],
                "dst": [e[1] for e in edges],
                "op": [op_id] * len(edges),
                "src_table": [t_in.table_id] * len(edges),
                "dst_table": [t_out.table_id] * len(edges),
            },
            schema=schema.TRIPLES,
        )
        self.run.txn.store.fs.create_dir(self.run.txn.path("triples"))
        pq.write_table(table, self.run.txn.path("triples", f"op-{op_id}.parquet"))
        self.run.mark_dataset("triples")
        return len(edges)


@provplug.hookimpl
def provplug_register_adapters(register: Callable[[Any], None]) -> None:
    register(RecordsAdapter())


@provplug.hookimpl
def provplug_run_started(run: Any) -> None:
    EVENTS.append(("run_started", run.engine))


@provplug.hookimpl
def provplug_step_finished(run: Any, step: StepInfo, op: OpInfo) -> None:
    EVENTS.append(("step_finished", f"{step.name}:{op.triples}"))


@provplug.hookimpl
def provplug_run_finished(run: Any, error: BaseException | None) -> None:
    EVENTS.append(("run_finished", run.status))
