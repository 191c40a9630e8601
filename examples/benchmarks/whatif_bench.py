"""What-if latency on the captured TPC-H pipeline (a benchmark, not a test).

    python examples/benchmarks/whatif_bench.py [--runs 3] [--tpch-scale 0.1] [--sizes 1,100,10000] [--out examples/benchmarks/whatif.md]

The TPC-H pipeline of capture_bench.py (Q1, Q3, Q5 over six sources) is
captured once, with its row lineage, into a fresh store. Then, for each size
N, N lineitem rows drawn at random (seeded) are deleted by value id and
``provplug.open(STORE).whatif(value_id=...)`` answers what happens to Q1, Q3
and Q5, ``--runs`` times in one process (the first call of a size reads the
catalogue cold, later ones find it cached); figures are medians. Measured in
the same process, side by side: re-running the plain pipeline (no capture) on
lineitem without those rows, what the what-if saves.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from capture_bench import run_captured, tpch_data, tpch_pipeline  # noqa: E402

import provplug  # noqa: E402
from provplug import ids, schema  # noqa: E402
from provplug.query.catalog import catalog_for  # noqa: E402
from provplug.sparksession import local_spark  # noqa: E402
from provplug.store.open import open_store  # noqa: E402


def lineitem_rows(store_path: Path) -> tuple[int, list[int]]:
    """The lineitem table id and its stored row numbers."""
    store = open_store(store_path)
    entry = catalog_for(store).table_named("lineitem")
    rows = store.read_rows(entry.run_id, entry.table_id)
    assert rows is not None
    return entry.table_id, rows.column(schema.ROW_COLUMN).to_pylist()


def doomed_keys(store_path: Path, table_id: int, doomed: list[int]) -> list[tuple[int, int]]:
    """(l_orderkey, l_linenumber), lineitem's key, of the stored rows ``doomed``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    store = open_store(store_path)
    entry = catalog_for(store).tables[table_id]
    rows = store.read_rows(entry.run_id, table_id, where=pc.field(schema.ROW_COLUMN).isin(pa.array(doomed, pa.int64())))
    assert rows is not None and rows.num_rows == len(doomed)
    return list(zip(rows.column("l_orderkey").to_pylist(), rows.column("l_linenumber").to_pylist(), strict=True))


def rerun_without(spark: Any, files: dict[str, Path], keys: list[tuple[int, int]], out: Path) -> float:
    """The plain pipeline on lineitem without the rows of ``keys``."""
    start = time.perf_counter()
    sources = {name: spark.read.parquet(str(path)) for name, path in files.items()}
    doomed = spark.createDataFrame(keys, "l_orderkey bigint, l_linenumber int")
    sources["lineitem"] = sources["lineitem"].join(doomed, ["l_orderkey", "l_linenumber"], "left_anti")
    for i, frame in enumerate(tpch_pipeline(sources)):
        frame.write.parquet(str(out / f"out{i}"))
    return time.perf_counter() - start


def measure(store_path: Path, size: int, runs: int, table_id: int, rows: list[int]) -> dict[str, Any]:
    doomed = sorted(random.Random(size).sample(rows, size))
    value_ids = [ids.value_id(table_id, 0, r) for r in doomed]
    times, answer = [], None
    for _ in range(runs):
        start = time.perf_counter()
        answer = provplug.open(store_path).whatif(value_id=value_ids)
        times.append(time.perf_counter() - start)
    assert answer is not None
    effects = {
        t.table: (len(t.vanished), len(t.changed), len(t.unknown), t.untouched, t.rows_may_appear is not None)
        for t in answer.tables
        if t.op
    }
    print(f"{size:>6} rows: whatif {[round(t, 3) for t in times]} s; {effects}", flush=True)
    return {
        "size": size,
        "times": times,
        "median": statistics.median(times),
        "effects": effects,
        "stats": answer.stats,
        "doomed": doomed,
    }


def report(results: list[dict[str, Any]], command: str, scale: float, capture_s: float) -> str:
    lines = [
        "# What-if benchmark",
        "",
        "Written by `examples/benchmarks/whatif_bench.py` (not a test). Reproduce with:",
        "",
        "```",
        command,
        "```",
        "",
        f"Machine: {os.cpu_count()} cores, shared with other jobs (timings are noisy); TPC-H scale {scale:g}, "
        f"the pipeline of capture_bench.py (Q1, Q3, Q5) captured once with row lineage"
        f"{'' if capture_s != capture_s else f' in {capture_s:.1f} s'}. "
        f"Deleted: random lineitem rows (seeded by the size), by value id. What-if latency: median of "
        f"{len(results[0]['times'])} calls of `provplug.open(STORE).whatif(value_id=...)` in one process; "
        "re-run: the plain pipeline (no capture) on lineitem without those rows, Spark local[2], same process, "
        "measured once per size between the what-if calls.",
        "",
        "| deleted lineitem rows | what-if median (s) | all calls (s) | re-run (s) | re-run / what-if "
        "| row-lineage records read | stored rows read | Q1: vanish/change/unknown | Q3 | Q5 |",
        "|---:|---:|---|---:|---:|---:|---:|---|---|---|",
    ]
    for r in results:
        cells = []
        for table in ("Q1", "Q3", "Q5"):
            e = r["effects"].get(table)
            cells.append("untouched" if e is None else f"{e[0]}/{e[1]}/{e[2]}" + (" (+ may appear)" if e[4] else ""))
        lines.append(
            f"| {r['size']:,} | {r['median']:.3f} | {[round(t, 3) for t in r['times']]} | {r['rerun']:.2f} | "
            f"{r['rerun'] / r['median']:.0f}x | {r['stats']['lineage_records_read']:,} | "
            f"{r['stats']['stored_rows_read']:,} | {' | '.join(cells)} |"
        )
    lines += [
        "",
        "Q3 ends in `limit(10)`: its existence is opaque (rows below the top 10 may move up), so the rows a",
        "deletion reaches are reported unknown and the table as 'rows may appear'. Q1's and Q5's revenue and",
        "charge sums are sums of expressions (computed columns: 'changed, value unknown'); their plain sums,",
        "averages and counts are recomputed over the stored member values.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tpch-scale", type=float, default=0.1)
    parser.add_argument("--sizes", default="1,100,10000", help="numbers of lineitem rows to delete")
    parser.add_argument("--out", type=Path, default=HERE / "whatif.md")
    parser.add_argument(
        "--store",
        type=Path,
        default=None,
        help="keep the captured store here and reuse it when it exists (default: a temporary one)",
    )
    args = parser.parse_args(argv)
    files = tpch_data(args.tpch_scale)
    spark = local_spark("provplug-whatif-bench", "local[2]", **{"spark.driver.memory": "4g"})
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="provplug-whatif-bench-") as tmp:
            store = args.store or Path(tmp) / "tpch.prov"
            capture_s = float("nan")
            if not store.exists():
                capture_s = run_captured(spark, files, tpch_pipeline, store)
                print(f"captured in {capture_s:.1f} s", flush=True)
            table_id, rows = lineitem_rows(store)
            for size in (int(s) for s in args.sizes.split(",")):
                result = measure(store, size, args.runs, table_id, rows)
                keys = doomed_keys(store, table_id, result["doomed"])
                result["rerun"] = rerun_without(spark, files, keys, Path(tmp) / f"rerun-{size}")
                print(f"{size:>6} rows: re-run {result['rerun']:.2f} s", flush=True)
                results.append(result)
    finally:
        spark.stop()
    command = "python examples/benchmarks/whatif_bench.py " + " ".join(argv)
    text = report(results, command.strip(), args.tpch_scale, capture_s)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
