"""Steps declared with rates (``@provplug.step(..., rates=...)``): one rated
location edge instead of their triples, once the data has confirmed it.

A declaration says: output position ``k`` (the output's rows in row-number
order) comes from the input positions of the firing that produced it (the
input's rows in row-number order), and output column ``c`` from the input
columns the step's expressions reference. A wrong declaration must never
give a wrong answer, so the step is captured exactly as any other (its
triples written by its tasks) and, before its edge replaces them, the
triples are read back and checked: the row pairs they hold against the rates
(:func:`provplug.location.check_rates`, which names the first output row
that disagrees), then the triples themselves against the edge's expansion,
one for one. Any difference is a :class:`~provplug.errors.LocationError`
and the run fails; nothing is guessed.

Only a step with one input table and one output can declare rates, and its
aggregates must not defer their provenance to a group join (those triples
are written by a second job).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from provplug import ids
from provplug.errors import LocationError
from provplug.location import LocationEdge, Rates, RowRuns, check_rates, expand, location_edge
from provplug.writers import Destination

from .aligned import column_map
from .rewrite import Rewritten

RATES_PARAM = "rates"  # the op parameter a declaration is recorded as


def declared_rates(params: Mapping[str, Any]) -> Rates | None:
    """The rates a step's parameters declare (see :func:`provplug.capture.step`), or None."""
    record = params.get(RATES_PARAM)
    if record is None:
        return None
    if not isinstance(record, Mapping):
        raise LocationError(f"a step's rates are a mapping of consumption, production, buffer, dynamic, not {record!r}")
    try:
        return Rates(**record)
    except TypeError as exc:
        raise LocationError(f"a step's rates: {exc}") from None


def checkable(step: str, outputs: int, rewritten: Rewritten) -> int:
    """The one input table of a step that declares rates (else a LocationError)."""
    if outputs != 1 or len(rewritten.inputs) != 1:
        raise LocationError(f"step {step!r} declares rates, but has {len(rewritten.inputs)} input tables and "
                            f"{outputs} outputs: rates describe one input and one output")
    if rewritten.groups:
        raise LocationError(f"step {step!r} declares rates, but its aggregate's provenance goes through a group join "
                            "(set spark.provplug.groupJoins=global and group by a key)")
    (table,) = rewritten.inputs
    return table


def rated_edge(op_id: int, table_id: int, input_table: int, rewritten: Rewritten, src: RowRuns, dst: RowRuns,
               rates: Rates) -> LocationEdge:
    """The edge the declaration stands for: the column map from the cells' terms."""
    columns = column_map(rewritten, input_table)
    if columns is None:  # pragma: no cover - one input table: every term is of it
        raise LocationError(f"op {op_id}: a cell reads a table other than the step's input {input_table}")
    return location_edge(op_id, input_table, table_id, columns, dst, src, rates)


def read_triples(destination: Destination, files: Sequence[str]) -> pa.Table:
    """The (src, dst) of the triples a step's job wrote."""
    fs = destination.filesystem()
    tables = [pq.read_table(f, columns=["src", "dst"], filesystem=fs) for f in files]
    if not tables:
        return pa.table({"src": pa.array([], pa.int64()), "dst": pa.array([], pa.int64())})
    return pa.concat_tables(tables)


def check(step: str, edge: LocationEdge, written: pa.Table) -> None:
    """Raise unless ``written`` holds exactly the triples ``edge`` stands for."""
    assert edge.src_rows is not None
    src = written.column("src").to_numpy().astype(np.int64, copy=False)
    dst = written.column("dst").to_numpy().astype(np.int64, copy=False)
    rows = np.unique(np.stack([src & (ids.MAX_ROWS - 1), dst & (ids.MAX_ROWS - 1)]), axis=1)
    check_rates(step, edge.rates, edge.src_rows, edge.dst_rows, rows[0], rows[1])
    batches = list(expand([edge]))
    expected = (np.concatenate([b.column(0).to_numpy() for b in batches]) if batches else np.empty(0, np.int64),
                np.concatenate([b.column(1).to_numpy() for b in batches]) if batches else np.empty(0, np.int64))
    if not _same_pairs((src, dst), expected):
        raise LocationError(
            f"step {step}: its rows follow the declared {edge.rates.describe()}, but its cells do not all come "
            f"from the same input columns ({len(src):,} triples captured, the declaration stands for "
            f"{len(expected[0]):,}): declare no rates for it"
        )


def _same_pairs(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> bool:
    if len(a[0]) != len(b[0]):
        return False
    order_a, order_b = np.lexsort((a[1], a[0])), np.lexsort((b[1], b[0]))
    return bool(np.array_equal(a[0][order_a], b[0][order_b]) and np.array_equal(a[1][order_a], b[1][order_b]))
