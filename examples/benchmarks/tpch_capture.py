"""Capture overhead on the 22 TPC-H queries, one step per query (a benchmark,
not a test).

    python examples/benchmarks/tpch_capture.py [--scale 0.1] [--rounds 3] [--warmup 1]
        [--only q1,q6] [--sources-first] [--tcp-workers] [--out examples/benchmarks/tpch_capture.md]

Data: ``tpchgen-cli`` Parquet at ``--scale`` (generated once into
examples/benchmarks/data/; its ``string_view`` columns are read as Spark reads
them). The queries (:mod:`tpch_queries`) run as Spark SQL over temporary views
of the eight tables, and each query's result is written to Parquet: the way a
script runs them under ``provplug run``. One process, one ``local[2]``
SparkSession; every round runs the workload plain and captured
(``provplug.capture_writes`` into a fresh store), the order alternating from
round to round, after ``--warmup`` untimed rounds of both.

Reported, per query: the median seconds of its write plain and captured, the
ratio of the medians and each round's ratio, where the captured step's time
went (its plan rewrite and its writer job, from the adapter's log records),
the triples it stored and whether it was captured cell by cell or as a
coarse step. Over all queries:
the geometric mean of the ratios. Two fixed costs: *per step*, the captured
minus the plain time of a write of the 25-row ``nation`` table (a step with
next to no data), made as the run's last step (the same write as its first
step also starts the run); *per run*, the captured block's wall time minus the sum of
its writes (run start, commit).

``--tcp-workers`` runs Spark's Python workers over local TCP, as a session
made without provplug's default (Unix domain sockets) does: each writer
job's Python task then waits about 40 ms for its first batch.

``--sources-first`` puts one-row writes of the eight tables before the
queries: the run stores its sources there (a cost per run, reported apart),
where otherwise each table is stored by the first query that reads it.

``--profile QUERY FILE`` instead writes a cProfile of one captured write of
QUERY (after a write that starts the run and one that stores its sources)
to FILE, sorted by cumulative time: where a step's fixed cost goes.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from provplug_spark.session import STEP_TIMINGS

import provplug
from provplug.sparksession import UNIX_SOCKETS_CONF, local_spark
from provplug.store.open import open_store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tpch_queries import queries, tpch_tables  # beside this script, not a package

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
TINY = "tiny_nation"  # the step that measures the fixed cost per step
TINY_SQL = "select * from nation"
FIRST = "first_nation"  # the run's first step: it also pays for starting the run
SOURCE = "source_"  # --sources-first: a one-row write of each table, which stores it as a source
STEP_LOGGER = "provplug.spark"  # the Spark adapter's: its steps' "wrote" records carry their timings


def workload(
    spark: Any, files: dict[str, Path], sql: dict[str, str], out: Path, sources_first: bool = False
) -> dict[str, float]:
    """Register the views, then write each query's result; seconds per write.
    With ``sources_first``, one-row writes of each table come first: the run
    stores its sources there, not in the first query that reads each."""
    for name, path in files.items():
        spark.read.parquet(str(path)).createOrReplaceTempView(name)
    first = {f"{SOURCE}{t}": f"select * from {t} limit 1" for t in files} if sources_first else {}
    seconds = {}
    for name, text in {FIRST: TINY_SQL, **first, **sql, TINY: TINY_SQL}.items():
        start = time.perf_counter()
        spark.sql(text).write.mode("overwrite").parquet(str(out / name))
        seconds[name] = time.perf_counter() - start
    return seconds


def plain_round(
    spark: Any, files: dict[str, Path], sql: dict[str, str], out: Path, sources_first: bool
) -> tuple[dict[str, float], float]:
    start = time.perf_counter()
    seconds = workload(spark, files, sql, out, sources_first)
    return seconds, time.perf_counter() - start


class StepPhases(logging.Handler):
    """The plan rewrite and writer job seconds of each captured step, by its
    table, from the adapter's log records (provplug_spark.session.StepTimings)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seconds: dict[str, tuple[float, float]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        timings = getattr(record, STEP_TIMINGS, None)
        if timings is not None:
            self.seconds[timings.table] = (timings.rewrite, timings.writer_job)


def captured_round(
    spark: Any, files: dict[str, Path], sql: dict[str, str], out: Path, store: Path, sources_first: bool
) -> tuple[dict[str, float], float, dict[str, tuple[float, float]]]:
    phases = StepPhases()
    adapter = logging.getLogger(STEP_LOGGER)
    level = adapter.level
    adapter.addHandler(phases)
    adapter.setLevel(logging.INFO)
    start = time.perf_counter()
    try:
        with provplug.capture_writes(spark, store=store):
            seconds = workload(spark, files, sql, out, sources_first)
        return seconds, time.perf_counter() - start, phases.seconds
    finally:
        adapter.removeHandler(phases)
        adapter.setLevel(level)


def step_kinds(store: Path) -> dict[str, tuple[str, int]]:
    """Per written dataset: how its step was captured and its triples."""
    ops = open_store(store).ops().to_pylist()
    return {o["name"].removeprefix("write:"): (o["kind"], int(o["triples"] or 0)) for o in ops}


def measure(
    spark: Any,
    files: dict[str, Path],
    sql: dict[str, str],
    rounds: int,
    warmup: int,
    scratch: Path,
    sources_first: bool = False,
) -> dict[str, Any]:
    plain: dict[str, list[float]] = {}
    captured: dict[str, list[float]] = {}
    per_run: list[float] = []
    phases: dict[str, list[tuple[float, float]]] = {}
    kinds: dict[str, tuple[str, int]] = {}
    for r in range(warmup + rounds):
        store = scratch / f"store-{r}.prov"
        kinds_first = ("plain", "captured") if r % 2 == 0 else ("captured", "plain")
        for kind in kinds_first:
            if kind == "plain":
                seconds, total = plain_round(spark, files, sql, scratch / "plain", sources_first)
            else:
                seconds, total, steps = captured_round(spark, files, sql, scratch / "captured", store, sources_first)
            if r < warmup:
                continue
            target = plain if kind == "plain" else captured
            for name, s in seconds.items():
                target.setdefault(name, []).append(s)
            if kind == "captured":
                per_run.append(total - sum(seconds.values()))
                for name, spent in steps.items():
                    phases.setdefault(name, []).append(spent)
        kinds = step_kinds(store) if store.exists() else kinds
        shutil.rmtree(store, ignore_errors=True)
        print(f"round {r + 1}/{warmup + rounds} done{' (warm-up)' if r < warmup else ''}", file=sys.stderr)
    return {
        "plain": plain,
        "captured": captured,
        "per_run": per_run,
        "phases": phases,
        "kinds": kinds,
        "sources_first": sources_first,
        "tcp": spark.sparkContext.getConf().get(UNIX_SOCKETS_CONF, "false") != "true",
    }


def report(figures: dict[str, Any], scale: float, rounds: int) -> str:
    plain, captured, kinds = figures["plain"], figures["captured"], figures["kinds"]
    names = [n for n in plain if n not in (TINY, FIRST) and not n.startswith(SOURCE)]
    sources = [n for n in plain if n.startswith(SOURCE)]
    option = (" --sources-first" if figures["sources_first"] else "") + (" --tcp-workers" if figures["tcp"] else "")
    lines = [
        f"# TPC-H capture overhead: 22 queries, one step each (SF {scale:g}{option})",
        "",
        f"Made by `python examples/benchmarks/tpch_capture.py --scale {scale:g} --rounds {rounds}{option}` "
        f"(one local[2] SparkSession; {os.cpu_count()} cores; medians of {rounds} rounds, plain and captured "
        "alternating in each round; Python workers over "
        f"{'local TCP' if figures['tcp'] else 'Unix domain sockets'}).",
        "",
        "| query | plain s | captured s | ratio of medians | per-round ratios | plan rewrite s | writer job s "
        "| captured as | triples |",
        "|---|---:|---:|---:|---|---:|---:|---|---:|",
    ]
    ratios = []
    for name in names:
        p, c = statistics.median(plain[name]), statistics.median(captured[name])
        ratios.append(c / p)
        each = ", ".join(f"{cc / pp:.2f}" for pp, cc in zip(plain[name], captured[name], strict=True))
        kind, triples = kinds.get(name, ("?", 0))
        shown = "coarse step" if kind == "coarse" else "cell by cell"
        spent = figures["phases"].get(name) or [(math.nan, math.nan)]
        rewrite, job = (statistics.median(s[i] for s in spent) for i in (0, 1))
        lines.append(
            f"| {name} | {p:.2f} | {c:.2f} | {c / p:.2f} | {each} | {rewrite:.2f} | {job:.2f} | {shown} | {triples:,} |"
        )
    geomean = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    step = statistics.median(captured[TINY]) - statistics.median(plain[TINY])
    lines += [
        "",
        f"**Geometric mean of the ratios: {geomean:.2f}x** over {len(ratios)} queries.",
        "",
        f"- Fixed cost per step: {step:.2f} s (captured minus plain write of the 25-row nation table, the run's "
        "last step; "
        f"plain {statistics.median(plain[TINY]):.2f} s, captured {statistics.median(captured[TINY]):.2f} s).",
        f"- Fixed cost per run: {statistics.median(figures['per_run']):.2f} s (the captured block's wall time "
        "minus its writes: run start and commit; the run's first step, the same nation write, "
        f"took {statistics.median(captured[FIRST]):.2f} s captured).",
        f"- Coarse steps: {sum(1 for n in names if kinds.get(n, ('',))[0] == 'coarse')} of {len(names)}.",
    ]
    if sources:
        stored = sum(statistics.median(captured[n]) for n in sources)
        written = sum(statistics.median(plain[n]) for n in sources)
        lines.append(
            f"- Storing the {len(sources)} sources (one-row writes of each table before the queries, so that no "
            f"query pays for the tables it reads first): {stored:.2f} s captured against {written:.2f} s plain, "
            "a cost per run."
        )
    return "\n".join(lines) + "\n"


def profile(spark: Any, files: dict[str, Path], sql: str, into: Path, scratch: Path) -> None:
    import cProfile
    import pstats

    for name, path in files.items():
        spark.read.parquet(str(path)).createOrReplaceTempView(name)
    with provplug.capture_writes(spark, store=scratch / "profiled.prov"):
        spark.sql(TINY_SQL).write.mode("overwrite").parquet(str(scratch / "start"))  # the run starts
        spark.sql(sql).write.mode("overwrite").parquet(str(scratch / "first"))  # its sources are stored
        profiler = cProfile.Profile()
        profiler.enable()
        spark.sql(sql).write.mode("overwrite").parquet(str(scratch / "profiled"))
        profiler.disable()
    with into.open("w") as out:
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(60)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--only", help="comma-separated query names (default: all 22)")
    parser.add_argument("--out", type=Path, default=HERE / "tpch_capture.md")
    parser.add_argument("--profile", nargs=2, metavar=("QUERY", "FILE"), help="profile one captured write")
    parser.add_argument(
        "--tcp-workers",
        action="store_true",
        help="Python workers over local TCP, as in a session made without provplug's setting (Unix sockets)",
    )
    parser.add_argument(
        "--sources-first",
        action="store_true",
        help="store the eight tables by one-row writes before the queries (their cost reported per run)",
    )
    args = parser.parse_args(argv)
    sql = queries(args.scale)
    if args.only:
        wanted = args.only.split(",")
        unknown = sorted(set(wanted) - set(sql))
        if unknown:
            parser.error(f"unknown queries {', '.join(unknown)} (q1 ... q22)")
        sql = {n: sql[n] for n in wanted}
    files = tpch_tables(args.scale)
    transport = {UNIX_SOCKETS_CONF: "false"} if args.tcp_workers else {}
    spark = local_spark("provplug-tpch-capture", "local[2]", **{"spark.driver.memory": "4g", **transport})
    if args.profile:
        query, into = args.profile
        if query not in queries(args.scale):
            parser.error(f"unknown query {query} (q1 ... q22)")
        with tempfile.TemporaryDirectory(prefix="provplug-tpch-") as scratch:
            profile(spark, files, queries(args.scale)[query], Path(into), Path(scratch))
        return 0
    with tempfile.TemporaryDirectory(prefix="provplug-tpch-") as scratch:
        figures = measure(spark, files, sql, args.rounds, args.warmup, Path(scratch), args.sources_first)
    text = report(figures, args.scale, args.rounds)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
