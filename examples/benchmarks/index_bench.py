"""Index build time and peak memory on the paper-shaped trace, at several
sizes, this tree's engine side by side with a previous commit's.

    python examples/benchmarks/index_bench.py --sizes 1 9 --runs 3 1 --previous 95077cd~1

A size is ``SCALE`` or ``SCALExCOPIES`` (``paper_trace.py --scale SCALE
--copies COPIES``: ``9`` is one trace of 9 times the paper's shape, ``1x24``
the paper's trace replicated 24 times, as the paper's scaled datasets were).
Each store ``examples/benchmarks/data/trace-SIZE-SEED.prov`` is generated
once (in a child process). Every build runs in a fresh child process that
reports its wall time and peak RSS (``getrusage`` of itself); with
``--previous REV`` the builds alternate between REV's ``provplug`` (from
``git archive``) and this tree's, and after each pair the two generations'
files are compared (every Parquet file's rows in order, its schema and row
groups, and ``meta.json``'s counts, splits and workflow). ``--spark-runs``
adds Spark builds (compared by content, sorted). Writes ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.dataset as pads
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

# Run in the child: one build, then what it cost.
BUILD = """
import json, resource, sys, time
from provplug.index import build_index
from provplug.progress import Progress
t0 = time.monotonic()
meta = build_index(sys.argv[1], engine=sys.argv[2], progress=Progress(enabled=sys.argv[3] == "1"))
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": time.monotonic() - t0, "cpu": usage.ru_utime + usage.ru_stime, "peak_kib": usage.ru_maxrss,
                  "generation": meta["generation"], "engine": meta["engine"], "counts": meta["counts"]}))
"""


def parse_size(text: str) -> tuple[float, int]:
    scale, _, copies = text.partition("x")
    return float(scale), int(copies or 1)


def store_path(size: str, seed: int) -> Path:
    return HERE / "data" / f"trace-{size}-{seed}.prov"


def ensure_store(size: str, seed: int) -> tuple[Path, float | None]:
    """The size's store, generated (in a child process) if missing; and the generation time."""
    path = store_path(size, seed)
    if path.exists():
        return path, None
    scale, copies = parse_size(size)
    t0 = time.monotonic()
    cmd = [
        sys.executable,
        str(HERE / "paper_trace.py"),
        str(path),
        "--scale",
        f"{scale:g}",
        "--copies",
        str(copies),
        "--seed",
        str(seed),
    ]
    subprocess.run(cmd, check=True)
    return path, time.monotonic() - t0


def previous_tree(rev: str, into: str) -> str:
    """``provplug`` of ``rev`` unpacked under ``into`` (a PYTHONPATH entry)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "provplug"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return into


def build(store: Path, engine: str, pythonpath: str | None, log: bool) -> dict[str, Any]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    out = subprocess.run(
        [sys.executable, "-c", BUILD, str(store), engine, "1" if log else "0"],
        check=True,
        env=env,
        cwd=tempfile.gettempdir(),
        stdout=subprocess.PIPE,
        text=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def data_files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*.parquet") if not p.name.startswith("_"))


def same_file(a: Path, b: Path) -> bool:
    """Same schema, same rows in the same order, same row groups."""
    ma, mb = pq.ParquetFile(a).metadata, pq.ParquetFile(b).metadata
    if [ma.row_group(i).num_rows for i in range(ma.num_row_groups)] != [
        mb.row_group(i).num_rows for i in range(mb.num_row_groups)
    ]:
        return False
    ta, tb = pq.read_table(a), pq.read_table(b)
    return bool(ta.schema.equals(tb.schema) and ta.equals(tb))


def same_generations(store: Path, a: str, b: str) -> bool:
    """Two generations of ``store`` hold the same files with the same content
    (read one pair of files at a time) and the same ``meta.json`` content."""
    x, y = store / "index" / a, store / "index" / b
    if data_files(x) != data_files(y) or not all(same_file(x / f, y / f) for f in data_files(x)):
        return False
    keys = ("counts", "splits", "split_tree", "workflow", "theta", "buckets", "runs")
    mx, my = (json.loads((g / "meta.json").read_text()) for g in (x, y))
    return all(mx[k] == my[k] for k in keys)


def fingerprint(store: Path) -> dict[str, Any]:
    """Sorted content of the small outputs (Spark writes rows in another order)."""
    from provplug.index import current_dir
    from provplug.store.open import open_store

    d = current_dir(open_store(store))
    sets = pq.read_table(f"{d}/sets.parquet").sort_by("csid")
    comps = pq.read_table(f"{d}/components.parquet").sort_by("ccid")
    deps = pads.dataset(f"{d}/setdeps", partitioning="hive").to_table(columns=["src_csid", "dst_csid"])
    deps = deps.sort_by([("src_csid", "ascending"), ("dst_csid", "ascending")])
    return {"sets": sets.to_pydict(), "components": comps.to_pydict(), "setdeps": deps.to_pydict()}


def bench_size(args: argparse.Namespace, size: str, runs: int, old_path: str | None) -> dict[str, Any]:
    store, generated = ensure_store(size, args.seed)
    result: dict[str, Any] = {"size": size, "store": store, "generated_s": generated, "new": [], "old": [], "same": []}
    for i in range(runs):
        if old_path is not None:
            old = build(store, "local", old_path, log=False)
            print(f"{size} previous run {i + 1}: {old['seconds']:.1f}s, {old['peak_kib'] / 2**20:.2f} GiB", flush=True)
            result["old"].append(old)
        new = build(store, "local", None, log=(i == 0))
        print(f"{size} new run {i + 1}: {new['seconds']:.1f}s, {new['peak_kib'] / 2**20:.2f} GiB", flush=True)
        result["new"].append(new)
        if old_path is not None:
            result["same"].append(same_generations(store, old["generation"], new["generation"]))
            print(f"{size} identical generations: {result['same'][-1]}", flush=True)
    if args.spark_runs:
        local = fingerprint(store)
        result["spark"] = [build(store, "spark", None, log=False) for _ in range(args.spark_runs)]
        result["spark_same"] = fingerprint(store) == local
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["1"], help="SCALE or SCALExCOPIES (default 1)")
    parser.add_argument(
        "--runs", nargs="+", type=int, default=[3], help="builds per engine, per size (one number: all)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--previous", metavar="REV", help="also build with this commit's provplug, alternately")
    parser.add_argument("--previous-sizes", nargs="+", metavar="SIZE", help="only at these sizes (default: all)")
    parser.add_argument("--spark-runs", type=int, default=0, help="Spark builds at each size (default none)")
    parser.add_argument("--out", default=str(HERE / "index.md"))
    args = parser.parse_args(argv)
    runs = args.runs * len(args.sizes) if len(args.runs) == 1 else args.runs
    if len(runs) != len(args.sizes):
        parser.error("give one --runs number, or one per size")

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="provplug-previous-") as tmp:
        old_path = previous_tree(args.previous, tmp) if args.previous else None
        compare = set(args.previous_sizes or args.sizes)
        results = [
            bench_size(args, size, n, old_path if size in compare else None)
            for size, n in zip(args.sizes, runs, strict=True)
        ]
    report = render(args, runs, results, load_before, os.getloadavg())
    Path(args.out).write_text(report)
    print(report)
    ok = all(all(r["same"]) and r.get("spark_same", True) for r in results)
    return 0 if ok else 1


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def _times(builds: list[dict[str, Any]]) -> str:
    if not builds:
        return "not run"
    ts = [b["seconds"] for b in builds]
    label = f"median of {len(ts)}" if len(ts) >= 3 else f"{len(ts)} run(s)"
    return f"**{_median(ts):.1f} s** ({label}: {', '.join(f'{t:.1f}' for t in ts)})"


def _cpu(builds: list[dict[str, Any]]) -> str:
    return f"{_median([b['cpu'] for b in builds]):.1f} s" if builds else "not run"


def _peak(builds: list[dict[str, Any]], triples: int) -> str:
    if not builds:
        return "not run"
    peak = max(b["peak_kib"] for b in builds) * 1024
    return f"**{peak / 2**30:.2f} GiB** ({peak / triples:.0f} B/triple)"


def render(
    args: argparse.Namespace, runs: list[int], results: list[dict[str, Any]], load_before: Any, load_after: Any
) -> str:
    cmd = " ".join(
        ["python examples/benchmarks/index_bench.py", "--sizes", *args.sizes, "--runs", *map(str, args.runs)]
        + (["--previous", args.previous] if args.previous else [])
        + (["--previous-sizes", *args.previous_sizes] if args.previous_sizes else [])
        + ([f"--spark-runs {args.spark_runs}"] if args.spark_runs else [])
        + ([f"--seed {args.seed}"] if args.seed else [])
    )
    lines = [
        "# Index build benchmark (paper-shaped trace)",
        "",
        f"Reproduce: `{cmd}` (from the repository root, venv active).",
        "",
        f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}, shared with other "
        f"jobs while measured (load average {load_before[0]:.1f} at the start, {load_after[0]:.1f} at the end), so "
        "absolute times are noisy: compare the engines inside one row, measured alternately in the same minutes. "
        "Every build runs in a fresh process; peak = that process's maximum resident set size.",
        "",
        "| trace | triples | values | engine | whole build: wall (read, components, splits, sets, layout, publish) | CPU (median) | peak RSS (largest) | identical files |",
        "|---|---:|---:|---|---|---|---|---|",
    ]
    for r in results:
        counts = r["new"][0]["counts"]
        m = counts["triples"]
        scale, copies = parse_size(r["size"])
        trace = f"`--scale {scale:g}" + (f" --copies {copies}`" if copies > 1 else "`")
        common = f"| {trace} | {m:,} | {counts['values']:,} |"
        same = f"{all(r['same'])} ({len(r['same'])} pairs)" if r["same"] else "not compared"
        lines.append(
            f"{common} local, this tree | {_times(r['new'])} | {_cpu(r['new'])} | {_peak(r['new'], m)} | {same} |"
        )
        if r["old"]:
            lines.append(
                f"{common} local, {args.previous} | {_times(r['old'])} | {_cpu(r['old'])} | {_peak(r['old'], m)} | |"
            )
        if r.get("spark"):
            lines.append(
                f"{common} Spark (local[2]) | {_times(r['spark'])} | driver only | driver only | "
                f"sets, components, set deps: {r['spark_same']} |"
            )
    gens = [f"`{r['size']}`: {r['generated_s']:.0f} s" for r in results if r["generated_s"] is not None]
    if gens:
        lines += ["", "Stores generated by this run (paper_trace.py in a child process): " + ", ".join(gens) + "."]
    lines += ["", *table9_section(results[0]["store"])]
    return "\n".join(lines) + "\n"


def table9_section(store: Path) -> list[str]:
    from provplug.index.stats import index_stats
    from provplug.store.open import open_store

    stats = index_stats(open_store(store))
    return [
        f"## Connected sets of `{store.name}` (automatic splits, theta = {stats['theta']:,})",
        "",
        f"Splits chosen: `{json.dumps(stats['splits'])}`",
        "",
        f"Totals: {stats['components']:,} components, {stats['sets']:,} sets, {stats['set_dependencies']:,} set dependencies, "
        f"largest set {stats['largest_set']:,} nodes.",
        "",
        "Table 9 style: per large component and split (final sets, labelled by the deepest split that made them): "
        "number of sets, sets with >= 1,000 nodes, nodes in the largest set.",
        "",
        table9_markdown(stats),
    ]


def table9_markdown(stats: dict[str, Any]) -> str:
    rows = stats["per_split"]
    splits = sorted({r["split"] for r in rows}, key=lambda s: tuple(int(p) for p in s[2:].split(".")))
    comps: list[tuple[int, int]] = []
    for r in rows:
        if r["ccid"] not in [c for c, _ in comps]:
            comps.append((r["ccid"], r["component_nodes"]))
    cell = {(r["ccid"], r["split"]): r for r in rows}
    lines = ["| component (nodes) | " + " | ".join(splits) + " |", "|---" * (len(splits) + 1) + "|"]
    for k, (ccid, nodes) in enumerate(comps[:6], 1):
        out = []
        for s in splits:
            r = cell.get((ccid, s))
            out.append(f"{r['sets']:,}, {r['sets_ge_1000']}, {r['largest_set']:,}" if r else "")
        lines.append(f"| LC{k} ({nodes:,}) | " + " | ".join(out) + " |")
    if len(comps) > 6:
        lines.append(f"| ... {len(comps) - 6} more large components | " + " | ".join("" for _ in splits) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
