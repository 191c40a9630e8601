"""Steps declared with rates (``@provplug.step(..., rates=...)``): one rated
location edge instead of their triples, once the data has confirmed it.

A declaration says: output position ``k`` (the output's rows in row-number
order) comes from the input positions of the firing that produced it (the
input's rows in row-number order), and output column ``c`` from the input
columns the step's expressions reference. A wrong declaration must never
give a wrong answer, so the step is captured exactly as any other: its
triples written by the tasks that number its rows (a second run of the plan
could number them otherwise, and the edge needs the output's row runs, known
only once that job has ended). Before its edge replaces them, Spark reads
them back and checks them (:func:`check`): they must be the edge's triples,
each once, as multisets — :func:`holds`, one shuffle of the written triples
and arithmetic on positions, no expansion. Only when they differ does Spark
say where, comparing them with the edge expanded on the executors: the first
output row whose input rows are not those the rates give, or else the first
cell whose input columns differ. The driver receives counts and a handful of
rows, never the triples: a declared step can be as large as any other. Any
difference is a :class:`~provplug.errors.LocationError` and the run fails;
nothing is guessed.

Only a step with one input table and one output can declare rates, and its
aggregates must not defer their provenance to a group join (those triples
are written by a second job).
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from provplug import ids
from provplug.errors import CaptureError, LocationError
from provplug.location import LocationEdge, Rates, RowRuns, location_edge
from provplug.location.edges import check_sizes
from provplug.plugin.writers import Destination
from provplug.store.triples import expanded_frame

from .aligned import column_map
from .rewrite import Rewritten

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession


def checkable(step: str, outputs: int, rewritten: Rewritten) -> int:
    """The one input table of a step that declares rates (else a LocationError)."""
    if outputs != 1 or len(rewritten.inputs) != 1:
        raise LocationError(
            f"step {step!r} declares rates, but has {len(rewritten.inputs)} input tables and "
            f"{outputs} outputs: rates describe one input and one output"
        )
    if rewritten.groups:
        raise LocationError(
            f"step {step!r} declares rates, but its aggregate's provenance goes through a group join "
            "(set spark.provplug.groupJoins=global and group by a key)"
        )
    (table,) = rewritten.inputs
    return table


def rated_edge(
    step: str,
    op_id: int,
    table_id: int,
    input_table: int,
    rewritten: Rewritten,
    src: RowRuns,
    dst: RowRuns,
    rates: Rates,
) -> LocationEdge:
    """The edge the declaration stands for: the column map from the cells' terms."""
    check_sizes(rates, src.size, dst.size, f"step {step}")
    columns = column_map(rewritten, input_table)
    if columns is None:  # pragma: no cover - one input table: every term is of it
        raise LocationError(f"op {op_id}: a cell reads a table other than the step's input {input_table}")
    return location_edge(op_id, input_table, table_id, columns, dst, src, rates)


# -- the check, on Spark -----------------------------------------------------------

PAIRS = ("src", "dst")
PAIRS_DDL = "src BIGINT, dst BIGINT"
ROW_MASK = ids.MAX_ROWS - 1  # a value id's row number
SHOWN = 5  # input rows an error message lists


def written_triples(spark: SparkSession, destination: Destination, prefix: str) -> DataFrame:
    """(src, dst) of the triples in the files ``prefix*`` of ``destination``, as Spark reads them."""
    files = [f"{destination.spark_path}/{posixpath.basename(p)}" for p in destination.files(prefix)]
    if not files:
        return spark.createDataFrame([], PAIRS_DDL)
    return spark.read.schema(PAIRS_DDL).parquet(*files)


def check(spark: SparkSession, step: str, edge: LocationEdge, written: DataFrame, captured: int) -> None:
    """Raise unless ``written`` ((src, dst), ``captured`` of them) holds
    exactly the triples ``edge`` stands for, each as often: one Spark job
    when they agree (:func:`holds`), a few more to say where they do not.
    The driver gets back a few rows, never the triples."""
    if edge.column_pairs and holds(edge, written):
        return
    # Where they differ: the rows first (the rates), then the cells (the column map).
    difference = _first_difference(written, expanded(spark, edge)) if edge.column_pairs else None
    _check_rows(spark, step, edge, written)  # also the edge without columns: no triple has shown its rows
    if difference is not None:
        raise LocationError(
            f"step {step}: its rows follow the declared {edge.rates.describe()}, but its cells do not all come "
            f"from the same input columns ({_described(difference)}; {captured:,} triples captured, the "
            f"declaration stands for {edge.triple_count:,}): declare no rates for it"
        )
    if edge.column_pairs:  # pragma: no cover - holds() and the differences disagree
        raise CaptureError(f"internal: step {step}'s triples were found to differ from its declaration, then equal")


def holds(edge: LocationEdge, written: DataFrame) -> bool:
    """Whether ``written`` is exactly the triples of ``edge``, as multisets.
    Both differences are empty exactly when every distinct written triple is
    one of the edge's (:func:`inside`, arithmetic on its positions), none is
    written twice, and there are as many as the edge stands for (its triples
    are distinct): so one shuffle of the written triples (a count per
    triple) and no expansion of the edge."""
    from pyspark.sql import functions as F

    def judge(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        distinct = wrong = 0
        for batch in batches:
            src, dst, n = (batch.column(c).to_numpy() for c in (*PAIRS, "n"))
            distinct += len(src)
            wrong += int(np.count_nonzero(~inside(edge, src, dst) | (n > 1)))
        yield pa.RecordBatch.from_pydict({"distinct": [distinct], "wrong": [wrong]})

    counted = written.groupBy(*PAIRS).agg(F.count(F.lit(1)).alias("n"))
    verdicts = counted.mapInArrow(judge, "distinct LONG, wrong LONG")
    (total,) = verdicts.agg(F.sum("distinct").alias("distinct"), F.sum("wrong").alias("wrong")).collect()
    return (total["wrong"] or 0) == 0 and (total["distinct"] or 0) == edge.triple_count


def inside(edge: LocationEdge, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Which triples ``(src[i], dst[i])`` are triples of ``edge``: of its
    tables, of a pair of its column map, and with the input row inside the
    window of the firing that produced the output row."""
    assert edge.src_rows is not None
    columns = ids.MAX_COLUMNS - 1
    pairs = np.array([out * ids.MAX_COLUMNS + source for out, source in edge.column_pairs], dtype=np.int64)
    kept: NDArray[np.bool_] = ((src >> ids.TABLE_SHIFT) == edge.src_table) & (
        (dst >> ids.TABLE_SHIFT) == edge.dst_table
    )
    kept &= np.isin(
        ((dst >> ids.COLUMN_SHIFT) & columns) * ids.MAX_COLUMNS + ((src >> ids.COLUMN_SHIFT) & columns), pairs
    )
    inputs, known_input = edge.src_rows.locate(src & ROW_MASK)
    outputs, known_output = edge.dst_rows.locate(dst & ROW_MASK)
    low, high = edge.rates.windows((outputs - 1) // edge.rates.production + 1)
    return kept & known_input & known_output & (inputs >= low) & (inputs <= high)


def expanded(spark: SparkSession, edge: LocationEdge) -> DataFrame:
    """(src, dst) of the triples ``edge`` stands for, expanded on the executors."""
    return expanded_frame(spark, [edge], PAIRS)


def _first_difference(captured: DataFrame, declared: DataFrame) -> Row | None:
    """The (src, dst) with the smallest output row that one side holds more
    often than the other (multiset difference, both ways: one shuffle of
    both sides, not one per direction), with both counts; None if equal."""
    from pyspark.sql import functions as F

    both = captured.select(*PAIRS, F.lit(1).alias("captured"), F.lit(0).alias("declared")).unionByName(
        declared.select(*PAIRS, F.lit(0).alias("captured"), F.lit(1).alias("declared"))
    )
    counted = both.groupBy(*PAIRS).agg(F.sum("captured").alias("captured"), F.sum("declared").alias("declared"))
    differing = counted.where(F.col("captured") != F.col("declared"))
    first = differing.orderBy(F.col("dst").bitwiseAND(ROW_MASK), "dst", "src").limit(1).collect()
    return first[0] if first else None


def _check_rows(spark: SparkSession, step: str, edge: LocationEdge, written: DataFrame) -> None:
    """Raise on the first output row (the smallest) whose input rows in
    ``written`` are not those the rates give."""
    from pyspark.sql import functions as F

    def rows(frame: DataFrame) -> DataFrame:
        return frame.select(*[F.col(c).bitwiseAND(ROW_MASK).alias(c) for c in PAIRS])

    observed = rows(written).distinct()
    one_column = dataclasses.replace(edge, columns=((0, (0,)),))  # its triples are the edge's row pairs
    difference = _first_difference(observed, rows(expanded(spark, one_column)))
    if difference is None:
        return
    row = int(difference["dst"])
    sources = observed.where(F.col("dst") == row).orderBy("src").limit(SHOWN + 1).collect()
    _contradiction(step, edge, row, [int(s["src"]) for s in sources])


def _contradiction(step: str, edge: LocationEdge, row: int, sources: list[int]) -> None:
    """The error naming output ``row``, the input rows it comes from (the
    first few) and those the rates give it."""
    assert edge.src_rows is not None
    rates = edge.rates
    position = int(edge.dst_rows.positions_of([row])[0])
    low, high = rates.window((position - 1) // rates.production + 1)
    given = edge.src_rows.rows_at(np.arange(low, min(high, low + SHOWN - 1) + 1))
    observed = _listed(sources[:SHOWN], len(sources) > SHOWN)
    declared = _listed(given.tolist(), high - low + 1 > SHOWN)
    raise LocationError(
        f"step {step} declares {rates.describe()}, but its output row {row} comes from input rows "
        f"[{observed or 'none'}] where the rates say [{declared}]"
    )


def _listed(rows: list[int], more: bool) -> str:
    return ", ".join(str(r) for r in rows) + (", ..." if more else "")


def _described(difference: Row) -> str:
    """One differing triple, in words."""
    _, in_column, in_row = ids.unpack(int(difference["src"]))
    _, out_column, out_row = ids.unpack(int(difference["dst"]))
    return (
        f"output row {out_row} column {out_column} from input row {in_row} column {in_column}: "
        f"captured {difference['captured']} time(s), declared {difference['declared']}"
    )
