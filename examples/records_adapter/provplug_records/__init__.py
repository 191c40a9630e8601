"""An example third-party capture adapter: pipelines over lists of dicts.

A step takes one ``Records`` and returns a list of dicts, row ``i`` of the
output made from row ``i`` of the input by an opaque function, so the black-box
rule applies: every output cell of row ``i`` <- every input cell of row ``i``.
It exists to show (and test) how an adapter plugs into provplug: an adapter
registers itself through a hook, types its run against
:class:`provplug.plugin.protocols.RunRecorder`, and writes rows and triples only
through the run's writers (never the store's files directly).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

import provplug
from provplug import ids
from provplug.model import OpInfo, StepInfo, TableInfo, TableOrigin, utc_now
from provplug.plugin.protocols import RunRecorder

EVENTS: list[tuple[str, str]] = []  # (hook, detail): what this plugin observed


class RecordsEngine:
    """Marker object: ``provplug.capture(RecordsEngine(), store=...)``."""


@dataclasses.dataclass
class Records:
    rows: list[dict[str, Any]]
    table: TableInfo


class RecordsAdapter:
    name = "records"

    def accepts(self, engine: object) -> bool:
        return isinstance(engine, RecordsEngine)

    def open(self, engine: object, run: RunRecorder) -> RecordsSession:
        return RecordsSession(run)


class RecordsSession:
    def __init__(self, run: RunRecorder) -> None:
        self.run = run

    def source(self, data: list[dict[str, Any]], name: str) -> Records:
        return self._write_table(name, "source", data)

    def run_step(
        self, step: StepInfo, func: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> Records:
        (source,) = [a for a in args if isinstance(a, Records)]
        started = utc_now()
        rows = func(*args, **kwargs)
        out = self._write_table(step.outputs[0], "output", rows)
        op_id = self.run.new_op_id()
        triples = self._write_triples(op_id, source, out)
        self.run.record_op(
            OpInfo(
                op_id,
                step.name,
                self.run.run_id,
                "udf",
                (source.table.table_id,),
                (out.table.table_id,),
                ("map",),
                step.params,
                started,
                utc_now(),
                triples,
            )
        )
        return out

    def close(self, error: BaseException | None) -> None:
        EVENTS.append(("session_closed", "error" if error else "ok"))

    def _write_table(self, name: str, origin: TableOrigin, rows: list[dict[str, Any]]) -> Records:
        columns = list(rows[0]) if rows else []
        table = self.run.new_table(name, origin, columns)
        with self.run.rows_writer(table.table_id) as writer:
            writer.write(pa.Table.from_pylist(rows), np.arange(len(rows)))
        table = dataclasses.replace(table, rows=len(rows), stored_rows=self.run.store_rows)
        self.run.record_table(table)
        return Records(rows, table)

    def _write_triples(self, op_id: int, src: Records, dst: Records) -> int:
        """Black box, row for row: every output cell <- every input cell of its row."""
        t_in, t_out = src.table, dst.table
        rows = np.arange(min(len(src.rows), len(dst.rows)), dtype=np.int64)
        pairs = [(ci, co) for ci in range(len(t_in.columns)) for co in range(len(t_out.columns))]
        if not pairs:
            return 0
        srcs = [ids.value_id(t_in.table_id, ci, 0) + rows for ci, _ in pairs]
        dsts = [ids.value_id(t_out.table_id, co, 0) + rows for _, co in pairs]
        with self.run.triples_writer(f"op-{op_id}") as writer:
            writer.write(np.concatenate(srcs), np.concatenate(dsts), op_id, dst_table=t_out.table_id)
        return int(writer.rows)


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
