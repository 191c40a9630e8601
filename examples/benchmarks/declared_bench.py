"""Checking a step's declared rates on Spark vs on the driver (issue 15; a benchmark, not a test).

    python examples/benchmarks/declared_bench.py [--rows 2000000] [--runs 3] [--before b4d60fb] [--out FILE]
    python examples/benchmarks/declared_bench.py --checks-only [--rows 2000000] [--runs 5] [--before b4d60fb]

One step declared ``rates={"consumption": 2, "production": 1}`` (consecutive
pairs of rows summed: ``--rows`` input rows, ``--rows / 2`` output rows,
``2 * --rows`` triples) over a Parquet source sorted by its key, captured on
``local[2]`` three ways, each run in its own process (a fresh JVM, so peak
memory is the variant's own), the variants alternating run after run:

* ``spark`` — this tree: the step's triples are compared with its edge's
  expansion by a Spark job (:mod:`provplug_spark.declared`);
* ``driver`` — the adapter as it was at ``--before`` (the triples read into
  NumPy on the driver and compared there), put first on ``PYTHONPATH``
  (Spark's Python workers inherit it);
* ``off`` — ``location_lineage=False``: the triples are stored and nothing
  is checked (the reference).

Each process captures a small slice of the data once untimed (first-use
class loading and JIT), then the whole step, timed (the ``capture`` block:
source copy, step, writer job, check, commit). Reported: medians, the
ratios to ``driver``, the Python driver's peak RSS (``ru_maxrss``: where the
old check's arrays lived) and the JVM's (``VmHWM``; in local mode it is
driver and executors at once).

``--checks-only`` times the two checks alone, side by side in ONE process
(one SparkSession), alternating: the triples one capture wrote are kept
aside, then checked ``--runs`` times by this tree's :func:`check` (read by
Spark) and by the one at ``--before`` (loaded beside it as a module of the
package: read into NumPy on the driver). The whole capture's timings on a
shared machine vary more than the check costs; this ratio does not.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PACKAGE = "adapters/spark/provplug_spark"
VARIANTS = ("driver", "spark", "off")
WARMUP_ROWS = 20_000


# -- one measured capture (a child process) ----------------------------------------


def write_source(path: Path, rows: int) -> None:
    """``rows`` rows sorted by ``k`` (1..rows), one file: positions follow ``k``."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    k = np.arange(1, rows + 1, dtype=np.int64)
    pq.write_table(pa.table({"k": k, "a": k % 4, "b": 10 * k}), path, row_group_size=1 << 18)


def capture(spark: Any, source: Path, store: Path, location_lineage: bool) -> float:
    from pyspark.sql import functions as F

    import provplug

    @provplug.step("Pairs", output="Pairs", rates={"consumption": 2, "production": 1})
    def pairs(t: Any) -> Any:
        return t.groupBy(F.floor((F.col("k") - 1) / 2).alias("pair")).agg(F.sum("a").alias("sa")).orderBy("pair")

    started = time.perf_counter()
    with provplug.capture(spark, store=store, location_lineage=location_lineage) as run:
        pairs(run.source(spark.read.parquet(str(source)), "T"))
    return time.perf_counter() - started


def child(args: argparse.Namespace) -> int:
    from provplug.sparksession import local_spark
    from provplug.store.locations import locations_of
    from provplug.store.open import open_store

    spark = local_spark("declared-bench", "local[2]", **{"spark.driver.memory": "2g"})
    work = Path(args.work)
    capture(spark, work / "warmup.parquet", work / f"warmup-{args.variant}.prov", args.variant != "off")
    seconds = capture(spark, work / "source.parquet", work / f"{args.variant}.prov", args.variant != "off")
    store = open_store(str(work / f"{args.variant}.prov"))
    edges = locations_of(store)
    jvm_peak = _jvm_peak_kib(spark)
    spark.stop()
    print(
        json.dumps(
            {
                "variant": args.variant,
                "seconds": seconds,
                "python_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "jvm_peak_mib": jvm_peak / 1024 if jvm_peak else None,
                "stored_triples": store.triples().count_rows(),
                "edge_triples": sum(e.triple_count for e in edges),
            }
        )
    )
    shutil.rmtree(work / f"{args.variant}.prov")
    shutil.rmtree(work / f"warmup-{args.variant}.prov")
    return 0


def _jvm_peak_kib(spark: Any) -> int | None:
    """The JVM's peak resident set (``VmHWM``), from /proc (Linux)."""
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    try:
        status = Path(f"/proc/{proc.pid}/status").read_text() if proc is not None else ""
    except OSError:
        return None
    peak = [line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")]
    return int(peak[0]) if peak else None


def checks_child(args: argparse.Namespace, old: Path) -> int:
    """Time this tree's check and the one at ``--before`` on the same triples, alternating."""
    import importlib.util

    import provplug_spark.declared as declared

    from provplug.plugin.writers import Destination
    from provplug.sparksession import local_spark

    spark = local_spark("declared-bench", "local[2]", **{"spark.driver.memory": "2g"})
    work = Path(args.work)
    spec = importlib.util.spec_from_file_location(
        "provplug_spark._declared_before", old / "provplug_spark" / "declared.py"
    )
    assert spec is not None and spec.loader is not None
    before = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(before)
    kept: dict[str, Any] = {}
    check = declared.check

    def keep_aside(spark_: Any, step: str, edge: Any, written: Any, captured: int) -> None:
        written.write.parquet(str(work / "written"))
        kept.update(step=step, edge=edge, captured=captured)
        check(spark_, step, edge, written, captured)

    declared.check = keep_aside  # type: ignore[assignment]
    capture(spark, work / "source.parquet", work / "checks.prov", True)
    declared.check = check
    files = sorted(str(f) for f in (work / "written").glob("*.parquet"))
    folder = str(work / "written")
    step, edge, captured = kept["step"], kept["edge"], kept["captured"]
    times: dict[str, list[float]] = {"spark": [], "driver": []}
    for _ in range(args.runs):
        started = time.perf_counter()
        check(
            spark, step, edge, declared.written_triples(spark, Destination(folder, folder, folder), "part-"), captured
        )
        times["spark"].append(time.perf_counter() - started)
        started = time.perf_counter()
        before.check(step, edge, before.read_triples(Destination(folder, folder, folder), files))
        times["driver"].append(time.perf_counter() - started)
    spark.stop()
    print(json.dumps({"times": times, "triples": edge.triple_count}))
    return 0


# -- the runs and the report --------------------------------------------------------


def old_package(before: str, into: Path) -> Path:
    """The Spark adapter as it was at ``before``, extracted under ``into``."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", before, PACKAGE], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / Path(PACKAGE).parent


def run_child(variant: str, work: Path, old: Path, runs: int = 1) -> dict[str, Any]:
    env = dict(os.environ)
    if variant == "driver":
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(old), env.get("PYTHONPATH", "")) if p)
    command = [
        sys.executable,
        __file__,
        "--child",
        variant,
        "--work",
        str(work),
        "--old",
        str(old),
        "--runs",
        str(runs),
    ]
    done = subprocess.run(command, check=True, capture_output=True, text=True, env=env)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def report(results: list[dict[str, Any]], args: argparse.Namespace, command: str) -> str:
    by = {v: [r for r in results if r["variant"] == v] for v in VARIANTS}
    median = {v: statistics.median(r["seconds"] for r in by[v]) for v in VARIANTS}
    lines = [
        f"Command: `{command}`; {dt.date.today().isoformat()}, {args.rows:,} input rows, "
        f"{args.runs} run(s) per variant, alternating, one process each; medians.",
        "",
        "| variant | capture (s) | vs driver | Python driver peak RSS (MiB) | JVM peak RSS (MiB) | stored triples | edge triples |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for v in VARIANTS:
        python_peak = max(r["python_peak_mib"] for r in by[v])
        jvm = [r["jvm_peak_mib"] for r in by[v] if r["jvm_peak_mib"] is not None]
        jvm_peak = f"{max(jvm):,.0f}" if jvm else "-"
        lines.append(
            f"| {v} | {median[v]:.2f} | {median[v] / median['driver']:.2f}x | {python_peak:,.0f} | {jvm_peak} | "
            f"{by[v][0]['stored_triples']:,} | {by[v][0]['edge_triples']:,} |"
        )
    runs = {v: ", ".join(f"{r['seconds']:.2f}" for r in by[v]) for v in VARIANTS}
    lines += ["", "All runs (s): " + "; ".join(f"{v} [{runs[v]}]" for v in VARIANTS)]
    return "\n".join(lines) + "\n"


def checks_report(result: dict[str, Any], args: argparse.Namespace, command: str) -> str:
    times = result["times"]
    spark, driver = (statistics.median(times[v]) for v in ("spark", "driver"))
    runs = {v: ", ".join(f"{t:.2f}" for t in times[v]) for v in ("spark", "driver")}
    return (
        "\n".join(
            [
                f"Command: `{command}`; {dt.date.today().isoformat()}, {args.rows:,} input rows "
                f"({result['triples']:,} triples), {args.runs} run(s) of each check, alternating, one process; medians.",
                "",
                "| check | median (s) | vs driver |",
                "|---|---:|---:|",
                f"| on Spark (this tree) | {spark:.2f} | {spark / driver:.2f}x |",
                f"| on the driver ({args.before}) | {driver:.2f} | 1.00x |",
                "",
                f"All runs (s): spark [{runs['spark']}]; driver [{runs['driver']}]",
            ]
        )
        + "\n"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", default="b4d60fb", help="the commit whose adapter checks on the driver")
    parser.add_argument("--out", type=Path, help="append the figures to this file")
    parser.add_argument("--checks-only", action="store_true", help="time the two checks alone, in one process")
    parser.add_argument("--child", choices=(*VARIANTS, "checks"), dest="variant", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--old", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.variant == "checks":
        return checks_child(args, Path(args.old))
    if args.variant:
        return child(args)
    command = "python examples/benchmarks/declared_bench.py " + " ".join(argv)
    with tempfile.TemporaryDirectory(prefix="declared-bench-") as tmp:
        work = Path(tmp)
        write_source(work / "source.parquet", args.rows)
        write_source(work / "warmup.parquet", WARMUP_ROWS)
        old = old_package(args.before, work / "old")
        if args.checks_only:
            text = checks_report(run_child("checks", work, old, args.runs), args, command)
        else:
            results = []
            for run in range(args.runs):
                for variant in VARIANTS:
                    results.append(run_child(variant, work, old))
                    print(f"run {run + 1} {variant}: {results[-1]}", file=sys.stderr)
            text = report(results, args, command)
    print(text)
    if args.out:
        with args.out.open("a") as out:
            out.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
