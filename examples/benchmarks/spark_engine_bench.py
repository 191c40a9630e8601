"""The Spark index engine against the local one on the paper-shaped trace,
side by side in one run, and the Spark query path (RQ and CSProv forced onto
Spark with ``tau=0``): first call and warm calls.

    python examples/benchmarks/spark_engine_bench.py [--scale 1] [--local-runs 3] [--spark-runs 2]
        [--query-base COMMIT] [--out examples/benchmarks/spark_engine.md]

* The committed runs of ``data/trace-SCALE-SEED.prov`` (made by
  ``paper_trace.py`` if missing) are copied to a private store
  ``data/spark-engine-SCALE-SEED.prov``, so other benchmarks' index builds on
  the shared store never race with these.
* Builds alternate local, Spark, local, Spark, ... in one process (one
  ``local[2]`` session, driver memory ``--driver-memory``, started once and timed apart):
  both engines see the same machine load. After the last build of each, the
  whole index (every row of every dataset) is compared.
* Queries run in fresh processes (nothing cached), once with this tree and,
  with ``--query-base``, once with the code of that commit (``git archive``),
  on the same index: the Spark session start, the first RQ and CSProv call,
  then warm calls; every Spark answer is checked against the driver's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))

import paper_trace  # noqa: E402  (the generator beside this file)


def private_store(scale: float, seed: int) -> Path:
    shared = HERE / "data" / f"trace-{scale:g}-{seed}.prov"
    if not shared.exists():
        paper_trace.generate(shared, scale, seed)
    private = HERE / "data" / f"spark-engine-{scale:g}-{seed}.prov"
    if not private.exists():
        tmp = private.with_suffix(".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(shared, tmp, ignore=shutil.ignore_patterns("index"))
        tmp.rename(private)
    return private


# -- whole-index comparison ----------------------------------------------------------
DATASETS = {  # dataset -> sort key (every column: rows are compared whole)
    "triples": ["src", "dst", "op", "src_table", "dst_table", "ccid", "src_csid", "dst_csid"],
    "setdeps": ["src_csid", "dst_csid"],
    "rsetdeps": ["src_csid", "dst_csid"],
    "value_sets": ["value_id", "ccid", "csid"],
    "sets.parquet": ["csid"],
    "components.parquet": ["ccid"],
}


def index_content(store: Any) -> dict[str, pa.Table]:
    """Every dataset of the live generation, sorted, with plain (nullable) types."""
    from provplug.index import current_dir

    gen = current_dir(store)
    out = {}
    for name, key in DATASETS.items():
        if name.endswith(".parquet"):
            table = pq.read_table(f"{gen}/{name}")
        else:
            table = pads.dataset(f"{gen}/{name}", partitioning="hive").to_table(columns=key)
        table = table.select(sorted(table.column_names)).sort_by([(k, "ascending") for k in key])
        out[name] = pa.table({c: table.column(c).combine_chunks() for c in table.column_names})
    return out


def same_content(a: dict[str, pa.Table], b: dict[str, pa.Table]) -> dict[str, bool]:
    result = {}
    for name in DATASETS:
        x, y = a[name], b[name]
        result[name] = (
            x.column_names == y.column_names
            and x.num_rows == y.num_rows
            and all(x.column(c).cast(y.column(c).type).equals(y.column(c)) for c in x.column_names)
        )
    return result


def bucket_files(store: Any) -> dict[str, int]:
    from provplug.index import current_dir

    gen = Path(current_dir(store))
    return {d: len(list((gen / d).glob("bucket=*/*.parquet"))) for d in ("triples", "value_sets", "setdeps")}


def build_side_by_side(path: Path, local_runs: int, spark_runs: int, master: str, memory: str) -> dict[str, Any]:
    from provplug.index import build_index
    from provplug.progress import Progress
    from provplug.sparksession import local_spark
    from provplug.store.open import open_store

    store = open_store(path)
    t0 = time.monotonic()
    spark = local_spark("provplug-spark-engine-bench", master, **{"spark.driver.memory": memory})
    spark.range(1).count()
    spark_start = time.monotonic() - t0
    times: dict[str, list[float]] = {"local": [], "spark": []}
    content: dict[str, dict[str, pa.Table]] = {}
    files: dict[str, dict[str, int]] = {}
    metas: dict[str, dict[str, Any]] = {}
    order = ["local" if i % 2 == 0 else "spark" for i in range(2 * max(local_runs, spark_runs))]
    left = {"local": local_runs, "spark": spark_runs}
    for engine in order:
        if not left[engine]:
            continue
        left[engine] -= 1
        t = time.monotonic()
        metas[engine] = build_index(store, engine=engine, spark=spark, progress=Progress(enabled=True, live=False))
        times[engine].append(time.monotonic() - t)
        print(f"{engine}: {times[engine][-1]:.1f} s", flush=True)
        if not left[engine]:
            content[engine] = index_content(store)
            files[engine] = bucket_files(store)
    spark.stop()
    same = same_content(content["local"], content["spark"]) if len(content) == 2 else {}
    counts = metas["local"]["counts"] if "local" in metas else metas["spark"]["counts"]
    return {"times": times, "spark_start": spark_start, "same": same, "files": files, "counts": counts}


# -- the Spark query path ------------------------------------------------------------
QUERY_SCRIPT = r"""
import json, sys, time
import numpy as np
path, value, warm, master, memory = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
import provplug
from provplug.sparksession import local_spark
t0 = time.perf_counter()
spark = local_spark("provplug-query-bench", master, **{"spark.driver.memory": memory})
spark.range(1).count()
out = {"spark_start": time.perf_counter() - t0}
print("code from", provplug.__file__, file=sys.stderr)
opened = provplug.open(path)
for method, direction in (("rq", "down"), ("csprov", "down"), ("rq", "up"), ("csprov", "up")):
    driver = opened.lineage(value_id=value, method=method, direction=direction)
    times = []
    for _ in range(1 + warm):
        t = time.perf_counter()
        answer = opened.lineage(value_id=value, method=method, direction=direction, tau=0, spark=spark)
        times.append(time.perf_counter() - t)
        assert answer.stats["path"] == "spark", answer.stats
        assert answer.value_ids == driver.value_ids, (method, direction)
    out[f"{method} {direction}"] = {"first": times[0], "warm": times[1:], "values": len(driver.value_ids),
                                    "triples": answer.stats["triples_scanned"]}
spark.stop()
print("RESULT " + json.dumps(out))
"""


def query_value(path: Path) -> tuple[int, int, int]:
    """A value of the connected set with the most triples (the smallest id
    with a parent and a child in that set), its set and the set's triples."""
    from provplug.index import current_dir
    from provplug.store.open import open_store

    gen = current_dir(open_store(path))
    sets = pq.read_table(f"{gen}/sets.parquet", columns=["csid", "triples"])
    big = int(np.argmax(sets.column("triples").to_numpy()))
    csid, triples = int(sets.column("csid")[big].as_py()), int(sets.column("triples")[big].as_py())
    rows = pads.dataset(f"{gen}/triples", partitioning="hive").to_table(
        columns=["src", "dst"], filter=(pads.field("dst_csid") == csid) & (pads.field("src_csid") == csid)
    )
    both = np.intersect1d(rows.column("src").to_numpy(), rows.column("dst").to_numpy())
    return int(both.min()), csid, triples


def run_queries(path: Path, value: int, warm: int, master: str, memory: str, code: Path | None) -> dict[str, Any]:
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = f"{code}{os.pathsep}{env.get('PYTHONPATH', '')}"
    proc = subprocess.run(
        [sys.executable, "-c", QUERY_SCRIPT, str(path), str(value), str(warm), master, memory],
        env=env,
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
        check=False,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise SystemExit(f"query run failed ({code or 'this tree'}):\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    return result


def checkout(commit: str) -> Path:
    target = Path(tempfile.mkdtemp(prefix="provplug-base-"))
    archive = subprocess.run(["git", "archive", commit, "provplug"], cwd=REPO, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target


# -- report -------------------------------------------------------------------------------
def med(ts: list[float]) -> str:
    if not ts:
        return "not run"
    return f"**{statistics.median(ts):.1f} s** ({', '.join(f'{t:.1f}' for t in ts)})"


def render(args: argparse.Namespace, command: str, build: dict[str, Any], queries: dict[str, Any]) -> str:
    lines = [
        "# Spark index engine and Spark query path",
        "",
        f"Reproduce: `{command}` (repository root, venv active).",
        "",
        f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}, shared with other "
        f"engineers' jobs while measured (load average at the start: {args.load}), so absolute times are noisy: the "
        f"ratio of medians measured in the same run is the figure. Spark: `{args.master}`, driver memory "
        f"{args.driver_memory}, default shuffle partitions (8).",
        "",
    ]
    if build:
        lines += build_lines(args, build)
    if queries:
        lines += query_lines(args, queries)
    return "\n".join(lines)


def build_lines(args: argparse.Namespace, build: dict[str, Any]) -> list[str]:
    t = build["times"]
    ratio = statistics.median(t["spark"]) / statistics.median(t["local"]) if t["spark"] and t["local"] else float("nan")
    c = build["counts"]
    return [
        "## Index build, side by side",
        "",
        f"Trace `paper_trace.py --scale {args.scale:g} --seed {args.seed}`: {c['triples']:,} triples, {c['values']:,} "
        f"values, {c['components']:,} components, {c['sets']:,} sets, {c['set_dependencies']:,} set dependencies. "
        "Builds alternate local, Spark, local, ... in one process; the Spark session is started once before them "
        f"({build['spark_start']:.1f} s, not counted).",
        "",
        "| engine | build time (median; runs) |",
        "|---|---|",
        f"| local (NumPy) | {med(t['local'])} |",
        f"| Spark | {med(t['spark'])} |",
        f"| Spark / local | **{ratio:.2f}x** |",
        "",
        "Identical index (every row of every dataset, sorted): "
        + (", ".join(f"{k}: {v}" for k, v in build["same"].items()) or "not compared")
        + ".",
        "",
        f"Bucket files written: {json.dumps(build['files'])}.",
        "",
    ]


def query_lines(args: argparse.Namespace, queries: dict[str, Any]) -> list[str]:
    lines = [
        "## Query path on Spark (`tau=0`), fresh process per code version",
        "",
        f"Value {queries['value']} of the connected set with the most triples (csid {queries['csid']}, "
        f"{queries['set_triples']:,} triples); {args.warm} warm calls after the first. Every Spark answer equals the "
        "driver's.",
        "",
        "| code | query | answer values | triples scanned | first call | warm (median) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for label, res in queries["runs"].items():
        for q, r in res.items():
            if not isinstance(r, dict):
                continue
            warm = f"{statistics.median(r['warm']):.2f} s" if r["warm"] else "-"
            lines.append(f"| {label} | {q} | {r['values']:,} | {r['triples']:,} | {r['first']:.2f} s | {warm} |")
        lines.append(f"| {label} | (Spark session start) | | | {res['spark_start']:.1f} s | |")
    lines.append("")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--local-runs", type=int, default=3)
    parser.add_argument("--spark-runs", type=int, default=2)
    parser.add_argument("--warm", type=int, default=3, help="warm Spark query calls after the first")
    parser.add_argument("--query-base", default=None, help="also time the queries with this commit's code")
    parser.add_argument("--no-queries", action="store_true")
    parser.add_argument("--skip-builds", action="store_true", help="queries only, on the store's live index")
    parser.add_argument("--store", default=None, help="default: a private copy of data/trace-SCALE-SEED.prov")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="6g")
    parser.add_argument("--out", default=str(HERE / "spark_engine.md"))
    args = parser.parse_args(argv)
    args.load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    command = "python examples/benchmarks/spark_engine_bench.py " + " ".join(argv if argv is not None else sys.argv[1:])

    path = Path(args.store) if args.store else private_store(args.scale, args.seed)
    build: dict[str, Any] = {}
    if not args.skip_builds:
        build = build_side_by_side(path, args.local_runs, args.spark_runs, args.master, args.driver_memory)
        print(json.dumps({k: v for k, v in build.items() if k != "counts"}, indent=1), flush=True)

    queries: dict[str, Any] = {}
    if not args.no_queries:
        value, csid, set_triples = query_value(path)
        queries = {"value": value, "csid": csid, "set_triples": set_triples, "runs": {}}
        if args.query_base:
            base = checkout(args.query_base)
            queries["runs"][f"before ({args.query_base})"] = run_queries(
                path, value, args.warm, args.master, args.driver_memory, base
            )
            shutil.rmtree(base, ignore_errors=True)
        queries["runs"]["after (this tree)"] = run_queries(
            path, value, args.warm, args.master, args.driver_memory, None
        )
    report = render(args, command.strip(), build, queries)
    Path(args.out).write_text(report + RUNNING_ON_A_CLUSTER)
    print(report)
    return 0 if not build or (build["same"] and all(build["same"].values())) else 1


RUNNING_ON_A_CLUSTER = """
## How the Spark engine works (what the figures measure)

`provplug/index/spark_engine.py` with `spark_input.py`, `spark_shuffle.py`, `spark_output.py`, `sparkwcc.py`:

1. The committed triples are dealt into input groups (row ranges of the
   stored files, slices of location edges; at least the default parallelism,
   at most ~`spark_input.GROUP_TRIPLES` = 4M triples each). One task per
   group reads it with pyarrow from the store's filesystem (Spark never
   holds the input), runs the NumPy union-find over it and sends one row per
   value (local root, smallest table code, local component size), plus its
   table pairs, to the task owning that value. Rows between tasks travel as
   Arrow IPC streams in a few binary rows (`spark_shuffle`), so Spark's
   shuffle moves bytes, not millions of rows converted from Arrow and back.
   The receiving tasks give the per-table counts (for the split choice), the
   table pairs and the *link graph* between local roots.
2. The link graph is solved in one task when it has at most
   `sparkwcc.TASK_EDGE_LIMIT` (20M) edges, else by large-star/small-star with
   local checkpoints. Its labels (up to `sparkwcc.BROADCAST_ROWS`) are
   broadcast; the groups are read and solved again, and every triple is sent
   (as Arrow, as above) to the task of its component, which runs Algorithm 3
   exactly as the local engine does and writes the component's bucket files
   itself with pyarrow, returning one row per file. A component above
   `spark_engine.COMPONENT_TASK_LIMIT` (20M triples), or more labels than
   can be broadcast, takes the row path instead (a join, and
   level-synchronous Algorithm 3 for such components).
3. The driver keeps exactly the files the successful tasks reported
   (deleting any other file under a dataset, e.g. of a failed attempt),
   writes an empty file into each empty bucket, and one task merges the
   parts of `sets.parquet` and `components.parquet`.

## Running on a cluster

What the code supports, no more:

* **The store** is a directory addressed by a URI that pyarrow can reach
  from the driver *and from every executor*: the engine's tasks read the
  triple files and write the index files with pyarrow's filesystem (the
  store's own, pickled into the tasks), not through Spark's Hadoop
  filesystems: `hdfs://namenode:8020/path/store.prov` (pyarrow's HDFS
  client: `libhdfs`, `CLASSPATH`/`HADOOP_HOME` on the driver and every
  executor) or `s3://bucket/path/store.prov` (credentials in the
  environment of the driver and the executors). `s3a://` URIs are not
  understood by pyarrow, so a store cannot be named that way. The Spark
  query path still reads the index through Spark
  (`ParquetStore.to_spark_path`, the same path and scheme; for `s3://`,
  `--conf spark.hadoop.fs.s3.impl=org.apache.hadoop.fs.s3a.S3AFileSystem`
  and the `hadoop-aws` jar).
* **No other path must be shared.** Intermediates are Spark's shuffle
  files and locally checkpointed (and, for huge components, persisted)
  blocks in the executors' memory and `spark.local.dir`; only the parts of
  `sets.parquet`/`components.parquet` go to the new generation's `_scratch`
  folder, removed before it is published. A local checkpoint is not
  recomputed when an executor is lost: the build then fails and is rerun.
  The new generation is written beside the live one and published by
  rewriting `CURRENT`.
* **Python on the executors**: the engine's tasks (`mapInArrow`) import
  `provplug.index.spark_engine` (and its `spark_*` modules), `sparkwcc`, `localwcc`, NumPy and pyarrow, so
  every executor needs an interpreter with provplug installed, e.g. a packed
  environment (venv-pack or conda-pack) shipped with `--archives
  provplug-env.tar.gz#env` and `PYSPARK_PYTHON=./env/bin/python` (Spark's
  "Python Package Management" recipe). Set `PYSPARK_PYTHON` yourself:
  `provplug.sparksession.local_spark` otherwise defaults it to the driver's
  own interpreter path.
* **Configuration the engine reads**: `spark.sql.shuffle.partitions` (the
  merge and per-component shuffles, and so the files per bucket; raise it
  with the data, so that a task's share of components fits its Python
  worker's memory and the Arrow data a task receives stays below 2 GiB) and
  the session's default parallelism (the fewest input groups). It sets
  adaptive execution with skew-join splitting on and
  `spark.sql.execution.arrow.maxRecordsPerBatch=100000` on the session.
* **Submitting**: `provplug index STORE --spark` starts (or reuses) a session
  through `local_spark`, whose master comes from `PROVPLUG_SPARK_MASTER`
  (default `local[*]`). Under `spark-submit`, call the API with the session
  spark-submit made:

  ```python
  # index_job.py
  from pyspark.sql import SparkSession
  from provplug.index import build_index

  spark = SparkSession.builder.getOrCreate()
  meta = build_index("hdfs://namenode:8020/prov/trace.prov", engine="spark", spark=spark)
  print(meta["counts"])
  ```

  `PYSPARK_DRIVER_PYTHON=python PYSPARK_PYTHON=./env/bin/python spark-submit --master yarn
  --deploy-mode client --archives provplug-env.tar.gz#env --conf spark.sql.shuffle.partitions=400 index_job.py`
  (client mode: the driver runs where provplug and libhdfs are installed).
  Queries above tau run on Spark the same way: `provplug.open(URI).lineage(..., spark=spark)`.
"""


if __name__ == "__main__":
    sys.exit(main())
