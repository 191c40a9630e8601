"""The index on Spark (DataFrame API only; nothing but small aggregates such as
per-table counts ever reaches the driver).

Every intermediate that is used more than once (triples with table codes,
per-value state after each split depth, the edge sets of each WCC round) is
written to a scratch directory inside the new generation and read back, which
bounds plan growth and is deleted before the generation is published.
"""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .. import schema, storefiles
from ..progress import Progress
from ..protocols import Store
from ..sparksession import spark_ddl, spark_type
from . import layout
from .algorithm import InputStats, OutputDir, SetPlan
from .sparkwcc import empty_labels, grouped_wcc, spark_wcc, tune
from .splits import CompiledSplits
from .workflow import TableCatalogue

# A current set whose kept edges exceed this is split by large-star/small-star
# on Spark instead of in one task's memory (~1 GB of NumPy arrays at the limit).
GROUP_EDGE_LIMIT = 20_000_000


class SparkEngine:
    name = "spark"

    def __init__(
        self, store: Store, catalogue: TableCatalogue, progress: Progress, spark: SparkSession, scratch: OutputDir
    ) -> None:
        self.store = store
        self.catalogue = catalogue
        self.progress = progress
        self.spark = spark
        self.scratch = scratch.spark_path  # intermediates are written and read by Spark only
        tune(spark)

    def _save(self, df: DataFrame, name: str) -> DataFrame:
        path = f"{self.scratch}/{name}-{uuid.uuid4().hex[:8]}"
        df.write.parquet(path)
        return self.spark.read.parquet(path)

    # -- input ---------------------------------------------------------------
    def load(self) -> InputStats:
        paths = [self.store.to_spark_path(p) for p in self.store.run_paths("triples")]
        self.progress.done("reading triples (spark)")
        triples_ddl = spark_ddl(schema.TRIPLES)
        if not paths:
            raw = self.spark.createDataFrame([], triples_ddl)
        else:
            raw = self.spark.read.schema(triples_ddl).parquet(*paths)
        codes = self.spark.createDataFrame(
            sorted(self.catalogue.code_of_id.items()), "table_id int, code int"
        )
        src_codes = F.broadcast(codes.select(F.col("table_id").alias("src_table"), F.col("code").alias("src_code")))
        dst_codes = F.broadcast(codes.select(F.col("table_id").alias("dst_table"), F.col("code").alias("dst_code")))
        self.triples = self._save(raw.join(src_codes, "src_table").join(dst_codes, "dst_table"), "triples")
        ends = self.triples.select(F.col("src").alias("v"), F.col("src_code").alias("tcode")).unionByName(
            self.triples.select(F.col("dst").alias("v"), F.col("dst_code").alias("tcode"))
        )
        self.nodes = self._save(ends.groupBy("v").agg(F.min("tcode").alias("tcode")), "nodes")
        table_values = {int(r["tcode"]): int(r["count"]) for r in self.nodes.groupBy("tcode").count().collect()}
        pairs = [
            (int(r["src_code"]), int(r["dst_code"]), int(r["count"]))
            for r in self.triples.groupBy("src_code", "dst_code").count().collect()
        ]
        stats = InputStats(
            triples=sum(n for _, _, n in pairs),
            values=sum(table_values.values()),
            table_values=table_values,
            pair_triples=sorted(pairs),
        )
        self._check_tables(raw, stats.triples)
        self.values = stats.values
        self.progress.done("read triples (spark)", stats.triples, "triples")
        return stats

    def _check_tables(self, raw: DataFrame, joined: int) -> None:
        """The joins with the table codes drop triples of unknown tables:
        compare with the files' row counts (metadata only) and name them."""
        files = self.store.triple_files()
        if joined == (storefiles.count_rows(self.store.fs, files, f"triples of {self.store.uri}") if files else 0):
            return
        ends = raw.select(F.col("src_table").alias("t")).union(raw.select(F.col("dst_table").alias("t")))
        seen = {int(r["t"]) for r in ends.distinct().collect()}
        raise self.catalogue.unknown_tables(sorted(seen - set(self.catalogue.code_of_id)), self.store.uri)

    # -- components and sets ---------------------------------------------------
    def build(self, plan: SetPlan, out: OutputDir) -> dict[str, int]:
        edges = self.triples.select("src", "dst")
        comp = self._wcc(edges, "components")
        state = self.nodes.join(comp, self.nodes["v"] == comp["node"], "left").select(
            "v", "tcode", F.coalesce("label", "v").alias("ccid")
        )
        sizes = state.groupBy("ccid").agg(F.count("*").alias("cc_nodes"))
        state = self._save(
            state.join(sizes, "ccid").select(
                "v",
                "tcode",
                "ccid",
                F.col("ccid").alias("label"),
                F.lit(-1).alias("split_id"),
                (F.col("cc_nodes") >= plan.theta).alias("active"),
            ),
            "state",
        )
        self.progress.done("components")
        state = self._partition(state, edges, plan)
        return self._write(state, plan.splits, out)

    def _wcc(self, edges: DataFrame, what: str) -> DataFrame:
        def on_round(k: int) -> None:
            self.progress.done(f"{what}: star round {k}")

        return spark_wcc(edges, f"{self.scratch}/wcc-{uuid.uuid4().hex[:8]}", on_round)

    def _scoped_wcc(self, kept: DataFrame, what: str) -> DataFrame:
        """Components of one split depth's kept edges. Every edge lies inside one
        current set, so sets small enough for one task are solved in memory
        there (one shuffle); otherwise large-star/small-star on Spark."""
        kept = self._save(kept, "kept")
        row = kept.groupBy("grp").count().agg(F.max("count")).first()
        largest = None if row is None else row[0]
        if largest is None:
            return empty_labels(self.spark)
        if largest <= GROUP_EDGE_LIMIT:
            self.progress.done(f"{what}: in-task union-find", int(largest), "edges in the largest set")
            partitions = int(self.spark.conf.get("spark.sql.shuffle.partitions") or 8)
            return grouped_wcc(kept, partitions)
        return self._wcc(kept.select("src", "dst"), what)

    def _partition(self, state: DataFrame, edges: DataFrame, plan: SetPlan) -> DataFrame:
        """Algorithm 3, one split depth per round (see :mod:`.algorithm`)."""
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
                edges.join(act.select(F.col("v").alias("src"), F.col("label").alias("sl"), F.col("key").alias("sk")), "src")
                .join(act.select(F.col("v").alias("dst"), F.col("label").alias("dl"), F.col("key").alias("dk")), "dst")
                .where((F.col("sl") == F.col("dl")) & (F.col("sk") == F.col("dk")))
                .select("src", "dst", F.col("sl").alias("grp"))
            )
            inner = self._scoped_wcc(kept, f"sets at split depth {depth + 1}")
            moved = self._move(keyed, inner)
            sizes = moved.where("active").groupBy("label").agg(F.count("*").alias("set_nodes"))
            state = self._save(
                moved.join(sizes, "label", "left").select(
                    "v",
                    "tcode",
                    "ccid",
                    "label",
                    "split_id",
                    (F.col("active") & (F.col("set_nodes") >= plan.theta) & F.col("deeper")).alias("active"),
                ),
                "state",
            )
            self.progress.done(f"sets at split depth {depth + 1}")
        return state

    @staticmethod
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

    # -- output ----------------------------------------------------------------
    def _write(self, state: DataFrame, splits: CompiledSplits, out: OutputDir) -> dict[str, int]:
        fs_dir, spark_dir = out.path, out.spark_path
        src_side = state.select(F.col("v").alias("src"), F.col("label").alias("src_csid"))
        dst_side = state.select(F.col("v").alias("dst"), F.col("label").alias("dst_csid"), "ccid")
        indexed = self._save(
            self.triples.join(src_side, "src").join(dst_side, "dst").select(
                *[F.col(f.name).cast(spark_type(f.type)) for f in layout.INDEXED_TRIPLES]
            ),
            "indexed",
        )
        self._write_bucketed(indexed, "dst_csid", layout.TRIPLE_BUCKETS, fs_dir, spark_dir, "triples", layout.INDEXED_TRIPLES)
        self.progress.done("wrote triples (spark)")

        deps = self._save(
            indexed.where(F.col("src_csid") != F.col("dst_csid")).select("src_csid", "dst_csid").distinct(), "deps"
        )
        self._write_bucketed(deps, "dst_csid", layout.SETDEP_BUCKETS, fs_dir, spark_dir, "setdeps", layout.SETDEPS)
        self._write_bucketed(deps, "src_csid", layout.SETDEP_BUCKETS, fs_dir, spark_dir, "rsetdeps", layout.SETDEPS)

        values = state.select(F.col("v").alias("value_id"), "ccid", F.col("label").alias("csid"))
        self._write_bucketed(
            values, "value_id", layout.VALUE_BUCKETS, fs_dir, spark_dir, "value_sets", layout.VALUE_SETS, sort="value_id"
        )

        names = F.array(*[F.lit(n) for n in splits.names]) if splits.names else F.array().cast("array<string>")
        set_triples = indexed.groupBy(F.col("dst_csid").alias("csid")).agg(F.count("*").alias("triples"))
        sets = (
            state.groupBy(F.col("label").alias("csid"))
            .agg(F.min("ccid").alias("ccid"), F.max("split_id").alias("split_id"), F.count("*").alias("nodes"))
            .join(set_triples, "csid", "left")
            .select(
                "csid",
                "ccid",
                F.when(F.col("split_id") >= 0, F.element_at(names, F.col("split_id") + 1)).alias("split"),
                "nodes",
                F.coalesce("triples", F.lit(0)).alias("triples"),
            )
            .orderBy("csid")
        )
        self._write_single(sets, fs_dir, spark_dir, "sets.parquet", layout.SETS)
        comp_triples = indexed.groupBy("ccid").agg(F.count("*").alias("triples"))
        components = (
            state.groupBy("ccid")
            .agg(F.count("*").alias("nodes"))
            .join(comp_triples, "ccid", "left")
            .select("ccid", "nodes", F.coalesce("triples", F.lit(0)).alias("triples"))
            .orderBy("ccid")
        )
        self._write_single(components, fs_dir, spark_dir, "components.parquet", layout.COMPONENTS)
        return {  # counted from the written files' metadata, not by Spark jobs
            "triples": _rows(self.store, f"{fs_dir}/triples"),
            "values": self.values,
            "components": _rows(self.store, f"{fs_dir}/components.parquet"),
            "sets": _rows(self.store, f"{fs_dir}/sets.parquet"),
            "set_dependencies": _rows(self.store, f"{fs_dir}/setdeps"),
        }

    def _write_bucketed(
        self, df: DataFrame, key: str, buckets: int, fs_dir: str, spark_dir: str, name: str, schema: Any, sort: str | None = None
    ) -> None:
        columns = [F.col(f.name).cast(spark_type(f.type)) for f in schema]
        out = df.select(*columns, F.pmod(F.col(key), F.lit(buckets)).cast("int").alias("bucket"))
        # No explicit partition count: adaptive execution may coalesce small
        # shuffles, and a coalesced partition still holds whole buckets.
        out = out.repartition("bucket").sortWithinPartitions("bucket", *([sort] if sort else []))
        out.write.partitionBy("bucket").parquet(f"{spark_dir}/{name}")
        fill_empty_buckets(self.store.fs, f"{fs_dir}/{name}", buckets, schema)

    def _write_single(self, df: DataFrame, fs_dir: str, spark_dir: str, name: str, schema: Any) -> None:
        """One Parquet file at ``name`` (Spark writes a directory; move its one part)."""
        tmp = f"_tmp-{uuid.uuid4().hex[:8]}"
        df.select(*[F.col(f.name).cast(spark_type(f.type)) for f in schema]).coalesce(1).write.parquet(f"{spark_dir}/{tmp}")
        fs = self.store.fs
        parts = [i.path for i in fs.get_file_info(pafs.FileSelector(f"{fs_dir}/{tmp}")) if i.base_name.endswith(".parquet")]
        if parts:
            fs.move(parts[0], f"{fs_dir}/{name}")
        else:
            pq.write_table(schema.empty_table(), f"{fs_dir}/{name}", filesystem=fs)
        fs.delete_dir(f"{fs_dir}/{tmp}")


def fill_empty_buckets(fs: pafs.FileSystem, folder: str, buckets: int, schema: Any) -> None:
    """Every ``bucket=K`` directory exists (Spark writes none for an empty bucket)."""
    for k in range(buckets):
        path = f"{folder}/bucket={k}"
        if fs.get_file_info(path).type == pafs.FileType.NotFound:
            fs.create_dir(path, recursive=True)
            pq.write_table(schema.empty_table(), f"{path}/part-empty.parquet", filesystem=fs)


def _rows(store: Store, path: str) -> int:
    return storefiles.count_rows(store.fs, path, path)
