"""Plain records passed between capture, store, plugins and queries."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Literal

OpKind = Literal["builtin", "udf", "imported", "coarse"]  # coarse: see CoarseEdge
TableOrigin = Literal["source", "output", "imported"]
COARSE_REASON = "coarse_reason"  # op parameter of a coarse step: why it is coarse


def coarse_reason(op: Mapping[str, Any]) -> str:
    """Why the coarse op ``op`` (an op record, its ``params`` a mapping or
    the JSON text the store keeps) is coarse."""
    params = op.get("params")
    if isinstance(params, str):
        params = json.loads(params or "{}")
    return str((params or {}).get(COARSE_REASON, "not captured cell by cell"))


def utc_now() -> datetime:
    """The current time, timezone-aware in UTC: every timestamp of a record."""
    return datetime.now(timezone.utc)


@dataclasses.dataclass(frozen=True)
class TableInfo:
    """A table of the store: a registered source, a step output or an imported one."""

    table_id: int
    name: str
    run_id: str
    origin: TableOrigin
    columns: tuple[str, ...] = ()
    rows: int | None = None
    stored_rows: bool = False
    # The dataset the table is, as OpenLineage names it (namespace and name:
    # ``file`` and an absolute path, ``s3://bucket`` and a key, a catalog and
    # ``db.table``); None when the table is no dataset outside the run.
    namespace: str | None = None
    dataset: str | None = None


@dataclasses.dataclass(frozen=True)
class OpInfo:
    """One step invocation (or one imported op name)."""

    op_id: int
    name: str
    run_id: str
    kind: OpKind
    inputs: tuple[int, ...] = ()
    outputs: tuple[int, ...] = ()
    operations: tuple[str, ...] = ()
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    started: datetime | None = None
    finished: datetime | None = None
    triples: int | None = None


@dataclasses.dataclass
class RunInfo:
    """A capture run or an import, as observers see it."""

    run_id: str
    store: str
    kind: Literal["capture", "import"]
    engine: str
    started: datetime
    finished: datetime | None = None
    status: Literal["running", "committed", "failed"] = "running"
    number: int | None = None  # the run's number (1, 2, ...), once committed
    index: str | None = None  # index the run at commit: "auto" (small runs) or "always" (capture(index=...))


@dataclasses.dataclass(frozen=True)
class StepInfo:
    """A decorated pipeline step about to run (or that ran)."""

    name: str
    inputs: Sequence[str]
    outputs: Sequence[str]
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class StoreLocation:
    """Where a store lives: its URI as the user gave it, the pyarrow
    filesystem its bytes move through, and its root path on that filesystem
    (the ``provplug_store_location`` hook answers with one)."""

    uri: str
    filesystem: Any  # a pyarrow.fs.FileSystem
    root: str


@dataclasses.dataclass(frozen=True)
class CoarseEdge:
    """What a step provplug could not capture cell by cell may derive from.

    A *coarse step* (op kind ``"coarse"``) stores its output rows as usual
    but no triples: one edge per (input table, output table) says that
    output column ``out`` of EVERY row may derive from input columns
    ``ins`` of EVERY row of ``src_table`` -- the finest grain that is
    certain. ``columns`` is ``None`` when the plan says nothing finer:
    every output column on every input column. ``reason`` says why the
    step is coarse (shown with every answer that crosses it).
    """

    op: int
    src_table: int
    dst_table: int
    reason: str
    columns: tuple[tuple[int, tuple[int, ...]], ...] | None = None  # (output column, its input columns)

    def sources_of(self, out_column: int, in_columns: int) -> tuple[int, ...]:
        """The input columns output column ``out_column`` may derive from
        (``in_columns``: how many columns ``src_table`` has)."""
        if self.columns is None:
            return tuple(range(in_columns))
        return next((ins for out, ins in self.columns if out == out_column), ())

    def targets_of(self, in_column: int, out_columns: int) -> tuple[int, ...]:
        """The output columns that may derive from input column ``in_column``."""
        if self.columns is None:
            return tuple(range(out_columns))
        return tuple(out for out, ins in self.columns if in_column in ins)


@dataclasses.dataclass(frozen=True)
class UncapturedWrite:
    """A write a run saw but could not capture at all (the write itself was done)."""

    name: str  # the dataset written (a path, a table name, a JDBC table)
    reason: str
