"""One capture run on a SparkSession: sources, steps, rows and triples.

Value ids are fixed by files, not by recomputation: every source and every
step output is materialised ONCE, with its row numbers, and downstream code
gets a DataFrame read back from those stored rows. A step output is first
written to a work dataset holding its columns, its row numbers, its per-row
provenance (one id or an array of ids per column) and the hidden grouping
values of aggregates whose provenance is deferred to a group join (all
computed by :mod:`.jvm`'s plan rewrite, in the same Spark job); the table's
rows and its triples are then both derived from that one materialisation, so
they cannot disagree even when the plan is nondeterministic (sample, limit
after shuffle, ...). A group join recomputes only an aggregate's input rows,
which the rewrite allows only when they are stable under recomputation.

The DataFrame handed downstream is ``spark.read.parquet(rows/<table>)``
restricted to the table's columns: the row-number column stays in the files
(the rewrite finds it on the Parquet leaf) and never shows to the user.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from provplug import ids, schema
from provplug.errors import CaptureError
from provplug.model import OpInfo, StepInfo, TableInfo, TableOrigin

from .jvm import PlanRewriter, Rewritten, TableLeaf
from .triples import write_triples

# Row numbers are (Spark partition << ROW_IN_PARTITION_BITS) | index in partition:
# assigned inside the writing job, no extra pass; the guard fails the job
# rather than let two rows share an id.
PARTITION_BITS = 10
ROW_IN_PARTITION_BITS = ids.ROW_BITS - PARTITION_BITS
WORK_DIR = "_work"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _quoted(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


def row_number_column() -> Column:
    part = F.spark_partition_id().cast("bigint")
    index = F.monotonically_increasing_id().bitwiseAND((1 << 33) - 1)
    fits = (part < (1 << PARTITION_BITS)) & (index < (1 << ROW_IN_PARTITION_BITS))
    return F.when(fits, F.shiftleft(part, ROW_IN_PARTITION_BITS).bitwiseOR(index)).otherwise(
        F.raise_error(F.lit(
            f"provplug: more than {1 << PARTITION_BITS} partitions or {1 << ROW_IN_PARTITION_BITS} rows "
            "in one partition; repartition the DataFrame"
        ))
    )


class SparkCaptureSession:
    """The Spark adapter's state for one capture run (AdapterSession protocol)."""

    def __init__(self, spark: SparkSession, run: Any) -> None:
        self.spark = spark
        self.run = run
        self.rewriter = PlanRewriter(spark)
        self.wrote_rows = False

    # -- sources ---------------------------------------------------------------
    def source(self, data: Any, name: str) -> DataFrame:
        frame = data if isinstance(data, DataFrame) else self.spark.createDataFrame(data)
        columns = self._checked_columns(frame.columns, name)
        table = self.run.new_table(name, "source", columns)
        path = self._rows_path(table.table_id)
        frame.select(*[_quoted(c) for c in columns], row_number_column().alias(schema.ROW_COLUMN)).write.parquet(path)
        return self._publish(table, "source")

    @staticmethod
    def _checked_columns(columns: Sequence[str], name: str) -> list[str]:
        if len(set(columns)) != len(columns):
            raise CaptureError(f"table {name!r} has duplicate column names {list(columns)}")
        if len(columns) > ids.MAX_COLUMNS:
            raise CaptureError(f"table {name!r} has {len(columns)} columns; at most {ids.MAX_COLUMNS} fit a value id")
        if schema.ROW_COLUMN in columns:
            raise CaptureError(f"table {name!r} has a column named {schema.ROW_COLUMN}, which provplug reserves")
        return list(columns)

    def _rows_path(self, table_id: int) -> str:
        return self.run.txn.spark_path("rows", str(table_id))

    def _publish(self, table: TableInfo, origin: TableOrigin) -> DataFrame:
        """Record ``table`` (now stored) and return its rows as the user sees them."""
        self.wrote_rows = True
        rows = self._parquet_rows(self.run.txn.path("rows", str(table.table_id)))
        self.run.record_table(TableInfo(
            table.table_id, table.name, self.run.run_id, origin, table.columns, rows, bool(self.run.store_rows)
        ))
        path = self._rows_path(table.table_id)
        self.rewriter.register(TableLeaf(table.table_id, table.columns, path))
        return self.spark.read.parquet(path).select(*[_quoted(c) for c in table.columns])

    def _parquet_files(self, folder: str) -> list[str]:
        fs = self.run.txn.store.fs
        infos = fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
        return sorted(i.path for i in infos if i.path.endswith(".parquet") and not i.base_name.startswith(("_", ".")))

    def _parquet_rows(self, folder: str, files: Sequence[str] | None = None) -> int:
        fs = self.run.txn.store.fs
        paths = self._parquet_files(folder) if files is None else files
        return sum(pq.ParquetFile(fs.open_input_file(p)).metadata.num_rows for p in paths)

    # -- steps -----------------------------------------------------------------
    def run_step(self, step: StepInfo, func: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        started = _now()
        result = func(*args, **kwargs)
        outputs = self._outputs(step, result)
        op_id = self.run.new_op_id()
        inputs: set[int] = set()
        operations: list[str] = []
        uses_udf = False
        tables, frames, triples = [], [], 0
        for name, frame in zip(step.outputs, outputs):
            rewritten = self.rewriter.rewrite(frame)
            table = self.run.new_table(name, "output", self._checked_columns(frame.columns, name))
            triples += self._materialise(table, rewritten, op_id)
            frames.append(self._publish(table, "output"))
            tables.append(table.table_id)
            inputs |= rewritten.inputs
            operations += [o for o in rewritten.operations if o not in operations]
            uses_udf = uses_udf or rewritten.uses_udf
        self.run.record_op(OpInfo(
            op_id, step.name, self.run.run_id, "udf" if uses_udf else "builtin", tuple(sorted(inputs)),
            tuple(tables), tuple(operations), dict(step.params), started, _now(), triples,
        ))
        return tuple(frames) if len(step.outputs) > 1 else frames[0]

    @staticmethod
    def _outputs(step: StepInfo, result: Any) -> list[DataFrame]:
        outputs = list(result) if len(step.outputs) > 1 and isinstance(result, (tuple, list)) else [result]
        if len(outputs) != len(step.outputs):
            raise CaptureError(f"step {step.name!r} declares outputs {list(step.outputs)} but returned {len(outputs)} value(s)")
        for name, out in zip(step.outputs, outputs):
            if not isinstance(out, DataFrame):
                raise CaptureError(f"step {step.name!r} returned {type(out).__name__} for {name!r}, not a Spark DataFrame")
        return outputs

    def _materialise(self, table: TableInfo, rewritten: Rewritten, op_id: int) -> int:
        """Write the output once (columns, row numbers, per-row provenance,
        group-join keys), then its rows and triples from that write; return
        the number of triples."""
        tid = str(table.table_id)
        work = self.run.txn.spark_path(WORK_DIR, tid)
        data = [_quoted(c) for c in table.columns]
        provs = [F.col(p) for p, none in zip(rewritten.prov_columns, rewritten.prov_none) if not none]
        rewritten.frame.select(
            *data, row_number_column().alias(schema.ROW_COLUMN), *provs, *[F.col(h) for h in rewritten.hidden]
        ).write.parquet(work)
        stored = self.spark.read.parquet(work)
        stored.select(*data, F.col(schema.ROW_COLUMN)).write.parquet(self._rows_path(table.table_id))
        triples_dir = self.run.txn.path("triples")
        before = set(self._parquet_files(triples_dir))
        write_triples(stored, rewritten, table.table_id, op_id, self.run.txn.spark_path("triples"))
        self.run.mark_dataset("triples")
        added = [f for f in self._parquet_files(triples_dir) if f not in before]
        self.run.txn.store.fs.delete_dir(self.run.txn.path(WORK_DIR, tid))
        return self._parquet_rows(triples_dir, added)

    # -- end of run ------------------------------------------------------------
    def close(self, error: BaseException | None) -> None:
        if error is not None:
            return  # the transaction discards the staging directory
        fs = self.run.txn.store.fs
        if fs.get_file_info(self.run.txn.path(WORK_DIR)).type != pafs.FileType.NotFound:
            fs.delete_dir(self.run.txn.path(WORK_DIR))
        if not self.wrote_rows:
            return
        if self.run.store_rows:
            self.run.mark_dataset("rows")
        else:  # rows were only the fixed ids' carrier for downstream steps
            fs.delete_dir(self.run.txn.path("rows"))
