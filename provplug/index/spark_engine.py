"""The index on Spark: every component is indexed whole inside one task;
Spark schedules the tasks and moves Arrow data between them.

1. ``load``: the committed triples are dealt into input groups
   (:mod:`.spark_input`), one task each, which read them with pyarrow from
   the store's filesystem. Each group runs the NumPy union-find over its own
   triples (:mod:`.sparkwcc`, "local") and sends one row per value it holds
   (local root, smallest table code, local component size) to the task of
   that value (:mod:`.spark_shuffle`: Arrow IPC streams as a few binary
   rows), with its table pairs' triple counts. That "merge" gives the
   per-table value counts the split choice needs, the table pairs, and the
   link graph between local roots. An unknown table id fails here, on the
   driver, before any code uses it.
2. ``build``: the link graph is solved (one task, or large-star/small-star
   when it is too large), which labels every linked local root with its
   component id. The groups are read and solved again (the same triples, so
   the same roots), each triple's ``ccid`` is the label of its local root
   (the labels broadcast to the tasks), and the triples are sent whole to
   the task of their component. That task runs Algorithm 3
   (:mod:`.algorithm`) on the components it received, exactly as the local
   engine does for all components at once (a component's rows never depend
   on another component's), and writes their files itself with pyarrow
   (:mod:`.spark_output`): Spark gets back one small row per file. When the
   labels are too many to broadcast, or a component is above
   :data:`COMPONENT_TASK_LIMIT` triples, the triples go through Spark as
   rows and are labelled by a join instead; such components are indexed
   level-synchronously on Spark (:meth:`SparkEngine._huge_rows`) and their
   rows written by tasks the same way.
3. Tasks merge every bucket that several tasks wrote into one file (so the
   generation has the local engine's number of files, whatever the number of
   tasks); the driver commits the files reported (:func:`.spark_output.commit`)
   and one task merges the parts of ``sets.parquet`` and ``components.parquet``.

Nothing but small aggregates (per-table counts, the ids of huge components,
the list of files written) reaches the driver, and the link graph's labels
when they are few enough to broadcast (:data:`.sparkwcc.BROADCAST_ROWS`).
Intermediates live in Spark's shuffle files and block storage (local
checkpoints; the level-synchronous path also persists); only the parts of
the two single files go to ``scratch`` (in the new generation, removed by
the caller). Local checkpoints are not recomputed when an executor is lost:
the build then fails and can be run again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from provplug.index import layout, spark_output
from provplug.index.algorithm import InputStats, OutputDir, SetPlan
from provplug.index.localwcc import wcc_labels
from provplug.index.spark_input import InputGroups, group_ids, input_groups
from provplug.index.spark_output import FILE_DDL, TaskOutput, file_batches, merge_parts
from provplug.index.spark_shuffle import BLOB_DDL, owner_keys, receive, send, shuffled, spread
from provplug.index.sparkwcc import (
    BROADCAST_ROWS,
    attach,
    concat_batches,
    link_labels,
    node_links,
    partition_roots,
    spark_wcc,
    tuned,
)
from provplug.index.workflow import TableCatalogue
from provplug.plugin.protocols import Store
from provplug.progress import Progress
from provplug.sparksession import spark_ddl, spark_type

# A component with more triples than this is indexed level-synchronously on
# Spark instead of in one task (~1.5 GB of NumPy arrays at the limit).
COMPONENT_TASK_LIMIT = 20_000_000

# The load step's row (NODES_COLUMNS) per value and input group (``k`` = VALUE_ROW): ``v``,
# its local root ``r``, its smallest table code ``t``, and ``n`` = the triples
# of its local component when it is that component's root (else 0). And one
# row per table pair of the group (``k`` = PAIR_ROW): ``v`` the source table
# id, ``r`` the destination's, ``n`` its triples.
VALUE_ROW, PAIR_ROW = 0, 1
# The triples tagged with their input group's local root ``r``.
TAGGED_DDL = "src long, dst long, op long, src_table int, dst_table int, r long"
# Rows of the merge step: kind 0 a link (a > b), 1 a table code's value count,
# 2 a root's triples, 3 a table pair's triples (a = source id << 32 | destination id).
MERGE_DDL = "kind tinyint, a long, b long"
LINK, TABLE_VALUES, ROOT_TRIPLES, PAIR = 0, 1, 2, 3
# Rows of the level-synchronous path (huge components), one kind per output
# of the layout. They share the indexed triples' columns; the other kinds
# name some of them differently (COLUMN_OF: layout name -> column of the
# row), so the rows stay as narrow as the widest output.
TRIPLE, VALUE, SET, COMPONENT, SETDEP = 0, 1, 2, 3, 4
OUT_COLUMNS = {"kind": pa.int8(), **{f.name: f.type for f in layout.INDEXED_TRIPLES}}
COLUMN_OF: dict[int, dict[str, str]] = {
    TRIPLE: {c: c for c in layout.INDEXED_TRIPLES.names},
    VALUE: {"value_id": "src", "ccid": "ccid", "csid": "dst_csid"},
    SET: {"csid": "dst_csid", "ccid": "ccid", "split_id": "src_table", "nodes": "src", "triples": "dst"},
    COMPONENT: {"ccid": "ccid", "nodes": "src", "triples": "dst"},
    SETDEP: {"src_csid": "src_csid", "dst_csid": "dst_csid"},
}
OUT_DDL = spark_ddl(pa.schema(list(OUT_COLUMNS.items())))
BATCH = 1 << 20


class SparkEngine:
    name = "spark"

    def __init__(
        self, store: Store, catalogue: TableCatalogue, progress: Progress, spark: SparkSession, scratch: OutputDir
    ) -> None:
        self.store = store
        self.catalogue = catalogue
        self.progress = progress
        self.spark = spark
        self.scratch_path = scratch.path
        self.partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 8)
        self.lookup = catalogue.id_to_code_array()
        self._persisted: list[DataFrame] = []
        self._broadcasts: list[Any] = []

    def _keep(self, df: DataFrame) -> DataFrame:
        """Persist ``df`` (columnar, spilling to disk) until the build ends."""
        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        self._persisted.append(df)
        return df

    def release(self) -> None:
        for df in self._persisted:
            df.unpersist()
        self._persisted.clear()
        for shared in self._broadcasts:
            shared.destroy()
        self._broadcasts.clear()

    # -- input ---------------------------------------------------------------
    def load(self) -> InputStats:
        try:
            with tuned(self.spark):  # the caller's session: its settings are back when it returns
                return self._load()
        except BaseException:
            self.release()
            raise

    def _load(self) -> InputStats:
        self.progress.done("reading triples (spark)")
        self.source = input_groups(self.store, self.spark.sparkContext.defaultParallelism)
        self.progress.done("input groups (spark)", len(self.source.groups), "groups")
        self.keys = owner_keys(self.spark, self.partitions)
        source, lookup, unknown, keys = self.source, self.lookup, len(self.catalogue.names), self.keys
        nodes = self._each_group().mapInArrow(lambda b: _send_nodes(source, lookup, unknown, keys, b), BLOB_DDL)
        merged = shuffled(nodes, self.partitions).mapInArrow(lambda b: _merge_partition(receive(b)), MERGE_DDL)
        self.merged = merged.localCheckpoint()
        self.progress.done("merged the groups' values (spark)")
        sums = self.merged.where(F.col("kind").isin(TABLE_VALUES, PAIR)).groupBy("kind", "a").agg(F.sum("b").alias("b"))
        counts = [(int(r["kind"]), int(r["a"]), int(r["b"])) for r in sums.collect()]
        pairs = self._pairs([(a, b) for kind, a, b in counts if kind == PAIR])  # checks every table id first
        table_values = {a: b for kind, a, b in counts if kind == TABLE_VALUES}
        stats = InputStats(
            triples=sum(n for _, _, n in pairs),
            values=sum(table_values.values()),
            table_values=table_values,
            pair_triples=pairs,
        )
        self.values = stats.values
        self.progress.done("read triples (spark)", stats.triples, "triples")
        return stats

    def _each_group(self) -> DataFrame:
        """One row (``id``) per input group, one group per task."""
        count = len(self.source.groups)
        return self.spark.range(count, numPartitions=count)

    def _pairs(self, pair_triples: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
        """Triples per (source table code, destination table code), from
        ``(source id << 32 | destination id, triples)``; a triple naming a
        table no committed run defines is store damage."""
        tables = [(key >> 32, key & 0xFFFFFFFF, n) for key, n in pair_triples]
        unknown = sorted({i for s, d, _ in tables for i in (s, d)} - set(self.catalogue.code_of_id))
        if unknown:
            raise self.catalogue.unknown_tables(unknown, self.store.uri)
        code = self.catalogue.code_of_id
        counts: dict[tuple[int, int], int] = {}
        for s, d, n in tables:
            key = (code[s], code[d])
            counts[key] = counts.get(key, 0) + n
        return sorted((a, b, n) for (a, b), n in counts.items())

    # -- components and sets ---------------------------------------------------
    def build(self, plan: SetPlan, out: OutputDir) -> dict[str, int]:
        try:
            with tuned(self.spark):
                output = TaskOutput(self.store.fs, out.path, f"{self.scratch_path}/parts")
                spark_output.prepare(self.store.fs, output)
                written = self._index_files(plan, output)
                self.progress.done("indexed components and wrote their files (spark)", len(written), "files")
                written = self._one_file_per_bucket(output, written)
                return self._commit(output, written)
        finally:
            self.release()

    def _index_files(self, plan: SetPlan, output: TaskOutput) -> list[dict[str, Any]]:
        """Every component indexed and written by the tasks; the files they wrote."""
        links = self.merged.where(F.col("kind") == LINK).select(F.col("a").alias("u"), F.col("b").alias("v"))
        labels, rows = link_labels(links, on_round=self._on_round("components"))
        huge = self._huge_components(labels, rows)
        self.progress.done("components", len(huge), "components indexed on Spark (above the task limit)")
        index = IndexTask(self.lookup, plan.splits.paths, plan.theta, list(plan.splits.names), output)
        if not huge and rows <= BROADCAST_ROWS:
            files = self._index_in_tasks(labels, index)
        else:
            files = self._index_through_rows(labels, rows, huge, plan, index)
        return [r.asDict() for r in files.collect()]

    def _index_in_tasks(self, labels: DataFrame, index: IndexTask) -> DataFrame:
        """Each input group's triples sent whole to the task of their
        component (:mod:`.spark_shuffle`); the component labels (few: one per
        linked local root) broadcast to the groups' tasks."""
        table = labels.toArrow().sort_by("node")
        shared = self.spark.sparkContext.broadcast((table.column("node").to_numpy(), table.column("label").to_numpy()))
        self._broadcasts.append(shared)
        source, keys, partitions = self.source, self.keys, self.partitions
        sent = self._each_group().mapInArrow(
            lambda b: _send_triples(source, shared.value, keys, partitions, b), BLOB_DDL
        )
        return shuffled(sent, partitions).mapInArrow(lambda b: index.run(receive(b)), FILE_DDL)

    def _index_through_rows(
        self, labels: DataFrame, rows: int, huge: list[int], plan: SetPlan, index: IndexTask
    ) -> DataFrame:
        """The triples through Spark as rows, labelled by a join: when the
        labels are many, or some components are above the task limit
        (those indexed level-synchronously, :meth:`_huge_rows`)."""
        source = self.source
        tagged = self._each_group().mapInArrow(lambda b: _tagged_triples(source, b), TAGGED_DDL)
        triples = attach(tagged, "r", labels, rows, "ccid").drop("r")
        in_task = triples.where(~F.col("ccid").isin(huge)) if huge else triples
        # The component id only routes the rows: the tasks find the components again.
        files = (
            in_task.repartition(self.partitions, "ccid")
            .drop("ccid")
            .mapInArrow(lambda b: index.run(concat_batches(b)), FILE_DDL)
        )
        if huge:
            names, output = index.names, index.output
            rows_df = self._huge_rows(triples.where(F.col("ccid").isin(huge)), plan)
            files = files.unionByName(rows_df.mapInArrow(lambda b: _write_rows(names, output, b), FILE_DDL))
        return files

    def _one_file_per_bucket(self, output: TaskOutput, written: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Every bucket several tasks wrote merged into one file, by tasks
        (the parts are deleted by the commit, as unreported files)."""
        crowded = spark_output.crowded_buckets(written)
        if not crowded:
            return written
        count = min(len(crowded), self.partitions)
        merged = self.spark.range(len(crowded), numPartitions=count).mapInArrow(
            lambda b: file_batches(output.merge_bucket(crowded[i]) for i in group_ids(b)), FILE_DDL
        )
        rows = [r.asDict() for r in merged.collect()]
        self.progress.done("merged buckets several tasks wrote (spark)", len(crowded), "buckets")
        return spark_output.merged_files(written, rows)

    def _commit(self, output: TaskOutput, written: list[dict[str, Any]]) -> dict[str, int]:
        """The bucketed datasets exactly as reported, the single files merged
        (in one task: they may be large), and ``meta.json``'s counts."""
        fs, generation = self.store.fs, output.generation
        rows = spark_output.commit(fs, generation, written)
        parts = {name: [w["path"] for w in written if w["dataset"] == name] for name in spark_output.SINGLE}
        merged = self.spark.range(1, numPartitions=1).mapInArrow(
            lambda _: _merge_singles(fs, generation, parts), "dataset string, rows long"
        )
        singles = {r["dataset"]: int(r["rows"]) for r in merged.collect()}
        self.progress.done("wrote sets and components (spark)", singles["sets"], "sets")
        return {
            "triples": rows["triples"],
            "values": self.values,
            "components": singles["components"],
            "sets": singles["sets"],
            "set_dependencies": rows["setdeps"],
        }

    def _on_round(self, what: str) -> Any:
        def on_round(k: int) -> None:
            self.progress.done(f"{what}: star round {k}")

        return on_round

    def _huge_components(self, labels: DataFrame, rows: int) -> list[int]:
        roots = self.merged.where(F.col("kind") == ROOT_TRIPLES).select(F.col("a").alias("r"), F.col("b").alias("n"))
        sizes = attach(roots, "r", labels, rows, "ccid").groupBy("ccid").agg(F.sum("n").alias("triples"))
        return sorted(int(r["ccid"]) for r in sizes.where(F.col("triples") > COMPONENT_TASK_LIMIT).collect())

    # -- components too large for one task --------------------------------------
    def _huge_rows(self, triples: DataFrame, plan: SetPlan) -> DataFrame:
        """Algorithm 3 level-synchronously on Spark (see :mod:`.algorithm`) for
        the components above the task limit, as the index step's rows."""
        codes = self.spark.createDataFrame(sorted(self.catalogue.code_of_id.items()), "table_id int, code int")
        triples = triples.join(
            F.broadcast(codes.select(F.col("table_id").alias("src_table"), F.col("code").alias("src_code"))),
            "src_table",
        ).join(
            F.broadcast(codes.select(F.col("table_id").alias("dst_table"), F.col("code").alias("dst_code"))),
            "dst_table",
        )
        triples = self._keep(triples)
        ends = triples.select(F.col("src").alias("v"), F.col("src_code").alias("tcode"), "ccid").unionByName(
            triples.select(F.col("dst").alias("v"), F.col("dst_code").alias("tcode"), "ccid")
        )
        state = ends.groupBy("v").agg(F.min("tcode").alias("tcode"), F.min("ccid").alias("ccid"))
        sizes = state.groupBy("ccid").agg(F.count("*").alias("cc_nodes"))
        state = state.join(sizes, "ccid").select(
            "v",
            "tcode",
            "ccid",
            F.col("ccid").alias("label"),
            F.lit(-1).alias("split_id"),
            (F.col("cc_nodes") >= plan.theta).alias("active"),
        )
        state = self._keep(self._partition(state.localCheckpoint(), triples.select("src", "dst"), plan))
        return _rows_from_labels(triples, state)

    def _partition(self, state: DataFrame, edges: DataFrame, plan: SetPlan) -> DataFrame:
        paths = plan.splits.paths
        for depth in range(plan.splits.depth):
            if state.where("active").limit(1).count() == 0:
                break
            rows = [
                (code, int(paths[code, depth]), bool(depth + 1 < plan.splits.depth and paths[code, depth + 1] >= 0))
                for code in range(paths.shape[0])
            ]
            keys = F.broadcast(self.spark.createDataFrame(rows, "tcode int, key int, deeper boolean"))
            keyed = state.join(keys, "tcode", "left")
            act = keyed.where("active").select("v", "label", "key")
            kept = (
                edges.join(
                    act.select(F.col("v").alias("src"), F.col("label").alias("sl"), F.col("key").alias("sk")), "src"
                )
                .join(act.select(F.col("v").alias("dst"), F.col("label").alias("dl"), F.col("key").alias("dk")), "dst")
                .where((F.col("sl") == F.col("dl")) & (F.col("sk") == F.col("dk")))
                .select("src", "dst")
            )
            what = f"sets at split depth {depth + 1}"
            inner = spark_wcc(kept, self.partitions, on_round=self._on_round(what))
            moved = _move(keyed, inner)
            set_sizes = moved.where("active").groupBy("label").agg(F.count("*").alias("set_nodes"))
            state = (
                moved.join(set_sizes, "label", "left")
                .select(
                    "v",
                    "tcode",
                    "ccid",
                    "label",
                    "split_id",
                    (F.col("active") & (F.col("set_nodes") >= plan.theta) & F.col("deeper")).alias("active"),
                )
                .localCheckpoint()
            )
            self.progress.done(what)
        return state


# -- tasks (run in Spark's Python workers) -------------------------------------------
def _send_nodes(
    source: InputGroups, lookup: np.ndarray, unknown: int, keys: list[int], batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Each input group's values (local root, smallest table code, local
    component size; to the task of the value) and table pairs. A table id
    the catalogue lacks gets code ``unknown`` here; the driver rejects it
    from the pairs."""
    for group in group_ids(batches):
        table = source.read(group, ("src", "dst", "src_table", "dst_table"))
        if table is None:
            continue
        nodes, roots, si, di = partition_roots(table.column("src").to_numpy(), table.column("dst").to_numpy())
        tcode = np.full(len(nodes), np.iinfo(np.int32).max, dtype=np.int32)
        np.minimum.at(tcode, si, _codes(lookup, unknown, table.column("src_table").to_numpy()))
        np.minimum.at(tcode, di, _codes(lookup, unknown, table.column("dst_table").to_numpy()))
        local = np.searchsorted(nodes, roots)  # dense index of each node's root
        root_triples = np.bincount(local[si], minlength=len(nodes))
        pairs = table.group_by(["src_table", "dst_table"]).aggregate([([], "count_all")])
        rows = pa.concat_tables(
            [
                _columns(
                    {
                        "k": np.full(len(nodes), VALUE_ROW, np.int8),
                        "v": nodes,
                        "r": roots,
                        "t": tcode,
                        "n": root_triples,
                    },
                    NODES_COLUMNS,
                ),
                _columns(
                    {
                        "k": np.full(pairs.num_rows, PAIR_ROW, np.int8),
                        "v": pairs.column("src_table"),
                        "r": pairs.column("dst_table"),
                        "n": pairs.column("count_all"),
                    },
                    NODES_COLUMNS,
                ),
            ]
        )
        yield from send(rows, spread(rows.column("v").to_numpy(), len(keys)), keys)


def _columns(columns: dict[str, Any], schema_: pa.Schema) -> pa.Table:
    return pa.Table.from_batches(list(_batches(columns, schema_)), schema_)


def _codes(lookup: np.ndarray, unknown: int, table_ids: np.ndarray) -> np.ndarray:
    """Table codes of table ids (``unknown`` for ids the catalogue lacks)."""
    ids = np.asarray(table_ids, dtype=np.int64)
    known = (ids >= 0) & (ids < len(lookup))
    codes = np.where(known, lookup[np.where(known, ids, 0)], -1)
    return np.where(codes < 0, unknown, codes).astype(np.int32)


def _send_triples(
    source: InputGroups,
    labels: tuple[np.ndarray, np.ndarray],
    keys: list[int],
    partitions: int,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """Each input group's triples, to the task of their component: the label
    of their local root (``labels``: sorted linked roots, their labels), or
    the root itself when it is on no link."""
    linked, label = labels
    for group in group_ids(batches):
        table = source.read(group, ("src", "dst", "op", "src_table", "dst_table"))
        if table is None:
            continue
        _, roots, si, _ = partition_roots(table.column("src").to_numpy(), table.column("dst").to_numpy())
        at = np.minimum(np.searchsorted(linked, roots), max(len(linked) - 1, 0))
        ccid = np.where(linked[at] == roots, label[at], roots) if len(linked) else roots
        yield from send(table, spread(ccid[si], partitions), keys)


def _tagged_triples(source: InputGroups, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Each input group's triples with their local root (as :func:`_node_rows` found it)."""
    for group in group_ids(batches):
        table = source.read(group, ("src", "dst", "op", "src_table", "dst_table"))
        if table is None:
            continue
        _, roots, si, _ = partition_roots(table.column("src").to_numpy(), table.column("dst").to_numpy())
        yield from _batches({**{c: table.column(c) for c in table.column_names}, "r": roots[si]}, TAGGED_COLUMNS)


def _merge_partition(table: pa.Table | None) -> Iterator[pa.RecordBatch]:
    """Every row of the values it holds: links, per-table counts, root sizes; and the table pairs."""
    if table is None:
        return
    is_pair = table.column("k").to_numpy() == PAIR_ROW
    pairs, table = table.filter(pa.array(is_pair)), table.filter(pa.array(~is_pair))
    v, r = table.column("v").to_numpy(), table.column("r").to_numpy()
    u, m = node_links(v, r)
    t, n = table.column("t").to_numpy(), table.column("n").to_numpy()
    # A value's table is the smallest code it is seen with, in any group.
    order = np.lexsort((t, v))
    first = np.ones(len(v), dtype=bool)
    first[1:] = v[order][1:] != v[order][:-1]
    per_table = np.bincount(t[order][first])
    codes = np.flatnonzero(per_table)
    root = n > 0
    pair_key = (pairs.column("v").to_numpy() << 32) | pairs.column("r").to_numpy()
    rows = (
        (LINK, u, m),
        (TABLE_VALUES, codes, per_table[codes]),
        (ROOT_TRIPLES, r[root], n[root]),
        (PAIR, pair_key, pairs.column("n").to_numpy()),
    )
    for kind, a, b in rows:
        yield from _batches({"kind": np.full(len(a), kind, np.int8), "a": a, "b": b}, MERGE_COLUMNS)


@dataclasses.dataclass(frozen=True)
class IndexTask:
    """Algorithm 3 on whole components, and their files (shipped to the tasks)."""

    lookup: np.ndarray
    paths: np.ndarray
    theta: int
    names: list[str]
    output: TaskOutput

    def run(self, table: pa.Table | None) -> Iterator[pa.RecordBatch]:
        """``table`` holds every triple of each component it touches; one row per file written."""
        if table is not None:
            yield from _index_components(self.lookup, self.paths, self.theta, self.names, self.output, table)


def _index_components(
    lookup: np.ndarray, paths: np.ndarray, theta: int, names: list[str], output: TaskOutput, table: pa.Table
) -> Iterator[pa.RecordBatch]:
    src, dst = table.column("src").to_numpy(), table.column("dst").to_numpy()
    nodes, _, si, di = partition_roots(src, dst)
    n = len(nodes)
    node_table = np.full(n, np.iinfo(np.int32).max, dtype=np.int32)
    np.minimum.at(node_table, si, lookup[table.column("src_table").to_numpy()])
    np.minimum.at(node_table, di, lookup[table.column("dst_table").to_numpy()])
    comp = wcc_labels(n, si, di)
    comp_nodes = np.bincount(comp, minlength=n)
    labels, split_id = set_labels(comp, comp_nodes, theta, paths, node_table, si, di)
    ccid, csid = nodes[comp], nodes[labels]
    src_csid, dst_csid = csid[si], csid[di]
    written = list(
        output.bucketed(
            "triples",
            table.append_column("ccid", pa.array(ccid[di]))
            .append_column("src_csid", pa.array(src_csid))
            .append_column("dst_csid", pa.array(dst_csid)),
        )
    )
    del table, src, dst
    written += output.bucketed("value_sets", pa.table({"value_id": nodes, "ccid": ccid, "csid": csid}))
    set_nodes = np.bincount(labels, minlength=n)
    roots = np.flatnonzero(set_nodes)
    written += output.part(
        "sets",
        pa.table(
            {
                "csid": nodes[roots],
                "ccid": ccid[roots],
                "split": split_names(names, split_id[roots]),
                "nodes": set_nodes[roots],
                "triples": np.bincount(labels[di], minlength=n)[roots],
            }
        ),
    )
    croots = np.flatnonzero(comp_nodes)
    written += output.part(
        "components",
        pa.table(
            {
                "ccid": nodes[croots],
                "nodes": comp_nodes[croots],
                "triples": np.bincount(comp[di], minlength=n)[croots],
            }
        ),
    )
    cross = src_csid != dst_csid
    written += _write_setdeps(output, *_distinct_pairs(src_csid[cross], dst_csid[cross]))
    yield from file_batches(written)


def _write_setdeps(output: TaskOutput, src_csid: np.ndarray, dst_csid: np.ndarray) -> list[dict[str, Any]]:
    """Distinct pairs sorted by (src, dst), by destination and by source set."""
    pairs = pa.table({"src_csid": src_csid, "dst_csid": dst_csid})
    return [*output.bucketed("setdeps", pairs), *output.bucketed("rsetdeps", pairs)]


def split_names(names: list[str], split_id: np.ndarray) -> pa.Array:
    """The split names of split ids (-1: null, a component below theta)."""
    table = pa.array([*names, None], type=pa.string())
    return table.take(pa.array(np.where(split_id < 0, len(names), split_id)))


def _write_rows(names: list[str], output: TaskOutput, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Rows of the level-synchronous path (:data:`OUT_DDL`, every kind), written as files."""
    table = concat_batches(batches)
    if table is None:
        return
    kinds = table.column("kind").to_numpy()
    written: list[dict[str, Any]] = []
    for kind, name in (
        (TRIPLE, "triples"),
        (VALUE, "value_sets"),
        (SET, "sets"),
        (COMPONENT, "components"),
        (SETDEP, "setdeps"),
    ):
        rows = table.filter(pa.array(kinds == kind))
        of_kind = pa.table({layout_name: rows.column(c) for layout_name, c in COLUMN_OF[kind].items()})
        if kind == VALUE:
            of_kind = of_kind.sort_by("value_id")
        if kind == SETDEP:
            order = np.lexsort((of_kind.column("dst_csid").to_numpy(), of_kind.column("src_csid").to_numpy()))
            written += _write_setdeps(output, *(of_kind.column(c).to_numpy()[order] for c in ("src_csid", "dst_csid")))
        elif kind == SET:
            sid = np.asarray(of_kind.column("split_id").to_numpy(), dtype=np.int64)
            written += output.part(
                name, of_kind.drop_columns(["split_id"]).append_column("split", split_names(names, sid))
            )
        elif kind == COMPONENT:
            written += output.part(name, of_kind)
        else:
            written += output.bucketed(name, of_kind)
    yield from file_batches(written)


def _merge_singles(fs: pafs.FileSystem, generation: str, parts: dict[str, list[str]]) -> Iterator[pa.RecordBatch]:
    counts = {name: merge_parts(fs, generation, name, paths) for name, paths in parts.items()}
    yield pa.RecordBatch.from_pydict({"dataset": list(counts), "rows": list(counts.values())})


def _distinct_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    first = np.ones(len(a), dtype=bool)
    first[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    return a[first], b[first]


def set_labels(
    comp: np.ndarray,
    comp_nodes: np.ndarray,
    theta: int,
    paths: np.ndarray,
    node_table: np.ndarray,
    si: np.ndarray,
    di: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 3 for all large components at once, one split depth per
    round (:mod:`.algorithm`): each node's set label (dense index of the
    set's smallest node) and the split that made it (-1: none)."""
    n = len(comp)
    labels = comp.copy()
    split_id = np.full(n, -1, dtype=np.int32)
    active = comp_nodes[comp] >= theta
    depth_count = paths.shape[1]
    for depth in range(depth_count):
        if not active.any():
            break
        key = np.where(active, paths[node_table, depth], -1)
        keep = active[si] & active[di] & (labels[si] == labels[di]) & (key[si] == key[di])
        inner = wcc_labels(n, si[keep], di[keep])
        labels = np.where(active, inner, labels)
        split_id = np.where(active, key, split_id).astype(np.int32)
        sizes = np.bincount(labels[active], minlength=n)
        deeper = paths[node_table, depth + 1] >= 0 if depth + 1 < depth_count else np.zeros(n, bool)
        active = active & (sizes[labels] >= theta) & deeper
    return labels, split_id


NODES_COLUMNS = pa.schema(
    [("k", pa.int8()), ("v", pa.int64()), ("r", pa.int64()), ("t", pa.int32()), ("n", pa.int64())]
)
TAGGED_COLUMNS = pa.schema(
    [
        ("src", pa.int64()),
        ("dst", pa.int64()),
        ("op", pa.int64()),
        ("src_table", pa.int32()),
        ("dst_table", pa.int32()),
        ("r", pa.int64()),
    ]
)
MERGE_COLUMNS = pa.schema([("kind", pa.int8()), ("a", pa.int64()), ("b", pa.int64())])


def _batches(columns: dict[str, Any], schema_: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Rows with the given columns (the others null), in batches of at most :data:`BATCH`."""
    n = len(next(iter(columns.values())))
    for start in range(0, n, BATCH):
        size = min(BATCH, n - start)
        arrays = []
        for f in schema_:
            col = columns.get(f.name)
            if col is None:
                arrays.append(pa.nulls(size, f.type))
            else:
                arrays.append(
                    pa.array(col[start : start + size], type=f.type)
                    if isinstance(col, np.ndarray)
                    else col.slice(start, size).cast(f.type).combine_chunks()
                )
        yield pa.RecordBatch.from_arrays(arrays, schema=schema_)


def _move(keyed: DataFrame, inner: DataFrame) -> DataFrame:
    joined = keyed.join(inner.select(F.col("node").alias("v"), F.col("label").alias("new_label")), "v", "left")
    return joined.select(
        "v",
        "tcode",
        "ccid",
        F.when(F.col("active"), F.coalesce("new_label", "v")).otherwise(F.col("label")).alias("label"),
        F.when(F.col("active"), F.col("key")).otherwise(F.col("split_id")).alias("split_id"),
        "active",
        F.coalesce("deeper", F.lit(False)).alias("deeper"),
    )


def _rows_from_labels(triples: DataFrame, state: DataFrame) -> DataFrame:
    """The index step's rows of components labelled on Spark (``state``: v, ccid, label, split_id)."""
    src_side = state.select(F.col("v").alias("src"), F.col("label").alias("src_csid"))
    dst_side = state.select(F.col("v").alias("dst"), F.col("label").alias("dst_csid"))
    indexed = triples.join(src_side, "src").join(dst_side, "dst")
    set_triples = indexed.groupBy(F.col("dst_csid").alias("label")).agg(F.count("*").alias("triples"))
    comp_triples = indexed.groupBy("ccid").agg(F.count("*").alias("triples"))
    parts = [
        _kind(TRIPLE, indexed.select("src", "dst", "op", "src_table", "dst_table", "ccid", "src_csid", "dst_csid")),
        _kind(VALUE, state.select(F.col("v").alias("value_id"), "ccid", F.col("label").alias("csid"))),
        _kind(
            SET,
            state.groupBy("label")
            .agg(F.min("ccid").alias("ccid"), F.max("split_id").alias("split_id"), F.count("*").alias("nodes"))
            .join(set_triples, "label", "left")
            .select(
                F.col("label").alias("csid"),
                "ccid",
                "split_id",
                "nodes",
                F.coalesce("triples", F.lit(0)).alias("triples"),
            ),
        ),
        _kind(
            COMPONENT,
            state.groupBy("ccid")
            .agg(F.count("*").alias("nodes"))
            .join(comp_triples, "ccid", "left")
            .select("ccid", "nodes", F.coalesce("triples", F.lit(0)).alias("triples")),
        ),
        _kind(SETDEP, indexed.where(F.col("src_csid") != F.col("dst_csid")).select("src_csid", "dst_csid").distinct()),
    ]
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


def _kind(kind: int, df: DataFrame) -> DataFrame:
    """``df`` (columns named as in the layout) as rows of the index step."""
    name_of = {column: name for name, column in COLUMN_OF[kind].items()}
    cols: list[Column] = [F.lit(kind).cast("tinyint").alias("kind")]
    for column, arrow_type in OUT_COLUMNS.items():
        if column == "kind":
            continue
        value = F.col(name_of[column]) if column in name_of else F.lit(None)
        cols.append(value.cast(spark_type(arrow_type)).alias(column))
    return df.select(*cols)
