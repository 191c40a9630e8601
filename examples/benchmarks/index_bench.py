"""Index build time on the paper-shaped trace: local (NumPy) and Spark paths,
plus a Table 9-style statistics table for the automatic splits.

    python examples/benchmarks/index_bench.py [--scale 1.0] [--runs 3] [--spark-runs 3]

Generates the trace store under ``examples/benchmarks/data/`` once (see
``paper_trace.py``), indexes it ``--runs`` times on the local path and
``--spark-runs`` times on Spark (local[2] here: the machine has 2 cores), checks
that both paths wrote the same sets, components and set dependencies, and
writes ``examples/benchmarks/index.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.dataset as pads
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import paper_trace  # noqa: E402  (the generator beside this file)


def spark_session(master: str) -> Any:
    from provplug.sparksession import local_spark

    return local_spark("provplug-index-bench", master, **{"spark.driver.memory": "6g"})


def fingerprint(store: Any) -> dict[str, Any]:
    """Sorted content of the small outputs, to compare the two paths."""
    from provplug.index import current_dir

    d = current_dir(store)
    sets = pq.read_table(f"{d}/sets.parquet").sort_by("csid")
    comps = pq.read_table(f"{d}/components.parquet").sort_by("ccid")
    deps = pads.dataset(f"{d}/setdeps", partitioning="hive").to_table(columns=["src_csid", "dst_csid"])
    deps = deps.sort_by([("src_csid", "ascending"), ("dst_csid", "ascending")])
    # Content only: Spark writes the same columns as nullable, pyarrow as required.
    return {"sets": sets.to_pydict(), "components": comps.to_pydict(), "setdeps": deps.to_pydict()}


def timed_builds(store: Any, engine: str, runs: int, spark: Any = None) -> tuple[list[float], dict[str, Any]]:
    from provplug.index import build_index
    from provplug.progress import Progress

    times, meta = [], {}
    for i in range(runs):
        t0 = time.monotonic()
        meta = build_index(store, engine=engine, spark=spark, progress=Progress(enabled=(i == 0)))
        times.append(time.monotonic() - t0)
        print(f"{engine} run {i + 1}: {times[-1]:.1f}s", flush=True)
    return times, meta


def table9_markdown(stats: dict[str, Any]) -> str:
    rows = stats["per_split"]
    splits = sorted({r["split"] for r in rows}, key=lambda s: tuple(int(p) for p in s[2:].split(".")))
    comps = []
    for r in rows:
        if r["ccid"] not in [c for c, _ in comps]:
            comps.append((r["ccid"], r["component_nodes"]))
    cell = {(r["ccid"], r["split"]): r for r in rows}
    lines = ["| component (nodes) | " + " | ".join(splits) + " |", "|---" * (len(splits) + 1) + "|"]
    for k, (ccid, nodes) in enumerate(comps, 1):
        out = []
        for s in splits:
            r = cell.get((ccid, s))
            out.append(f"{r['sets']:,}, {r['sets_ge_1000']}, {r['largest_set']:,}" if r else "")
        lines.append(f"| LC{k} ({nodes:,}) | " + " | ".join(out) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, default=3, help="local-path builds (median reported)")
    parser.add_argument("--spark-runs", type=int, default=3, help="Spark-path builds (median reported)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--store", default=None, help="default: examples/benchmarks/data/trace-SCALE-SEED.prov")
    parser.add_argument("--out", default=str(HERE / "index.md"))
    args = parser.parse_args(argv)

    from provplug.index.stats import index_stats
    from provplug.plugins import open_store

    path = Path(args.store or HERE / "data" / f"trace-{args.scale:g}-{args.seed}.prov")
    if not path.exists():
        t0 = time.monotonic()
        paper_trace.generate(path, args.scale, args.seed)
        print(f"generated {path} in {time.monotonic() - t0:.1f}s", flush=True)
    store = open_store(path)
    base = store.stats()

    local_times, local_meta = timed_builds(store, "local", args.runs)
    local_fp = fingerprint(store)
    stats = index_stats(store)

    spark_times: list[float] = []
    same = None
    if args.spark_runs:
        spark = spark_session(args.master)
        spark_times, _ = timed_builds(store, "spark", args.spark_runs, spark)
        same = fingerprint(store) == local_fp
        spark.stop()

    report = render(args, base, stats, local_meta, local_times, spark_times, same)
    Path(args.out).write_text(report)
    print(report)
    return 0 if same in (None, True) else 1


def render(
    args: argparse.Namespace,
    base: dict[str, int],
    stats: dict[str, Any],
    meta: dict[str, Any],
    local_times: list[float],
    spark_times: list[float],
    same: bool | None,
) -> str:
    def med(ts: list[float]) -> str:
        if not ts:
            return "not run"
        label = f"median of {len(ts)}" if len(ts) >= 3 else f"{len(ts)} run(s) only, no median"
        return f"**{statistics.median(ts):.1f} s** ({label}: {', '.join(f'{t:.1f}' for t in ts)})"

    cmd = f"python examples/benchmarks/index_bench.py --scale {args.scale:g} --seed {args.seed} --runs {args.runs} --spark-runs {args.spark_runs}"
    lines = [
        "# Index build benchmark (paper-shaped trace)",
        "",
        f"Reproduce: `{cmd}` (from the repository root, venv active).",
        "",
        f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()} — shared with other jobs "
        "while measured, so absolute times are noisy. Spark: `local[2]`, driver memory 6 GiB, 8 shuffle partitions.",
        "",
        "## Trace",
        "",
        f"`paper_trace.py --scale {args.scale:g} --seed {args.seed}`: {base['triples']:,} triples, {meta['counts']['values']:,} values on triples, "
        f"{len(meta['workflow']['tables'])} tables, {len(meta['workflow']['edges'])} workflow edges; "
        f"{stats['components']:,} components, largest {stats['largest_component']:,} nodes.",
        "",
        "## Whole index build (read triples, components, splits, sets, write and publish the layout)",
        "",
        "| path | time |",
        "|---|---|",
        f"| local (NumPy) | {med(local_times)} |",
        f"| Spark (DataFrame large-star/small-star) | {med(spark_times)} |",
        "",
        f"Both paths wrote identical sets, components and set dependencies: {same if same is not None else 'not compared'}.",
        "",
        "## Connected sets (automatic splits, theta = 25,000)",
        "",
        f"Splits chosen: `{meta['splits']}`",
        "",
        f"Totals: {stats['components']:,} components, {stats['sets']:,} sets, {stats['set_dependencies']:,} set dependencies, "
        f"largest set {stats['largest_set']:,} nodes.",
        "",
        "Table 9 style — per large component and split (final sets, labelled by the deepest split that made them): "
        "number of sets, sets with >= 1,000 nodes, nodes in the largest set.",
        "",
        table9_markdown(stats),
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
