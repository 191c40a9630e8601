"""Lineage query benchmark on the paper-shaped trace (paper §4, Tables 10-12).

Query classes, 10 values each, chosen with an independent CSR BFS:

* SC-SL: a value of a small (unpartitioned) component, 100-200 ancestors;
* LC-SL: a value of the largest component, 100-200 ancestors;
* LC-LL: a value of the largest component, 5,000-10,000 ancestors.

Per method (auto/CSProv, CCProv, RQ) and DuckDB's recursive CTE over the same
triples, all in one process: each query is run once to warm, then ``--runs``
times; a query's time is its median, a class's figure the median over its
queries. Then, per class and direction (ancestors and descendants), ``auto``
reading the mapped index files and reading the Parquet buckets (default
query cache), against DuckDB; the cold CLI (a fresh ``provplug lineage``
process per query) both ways; and the query over the trace's largest
connected set on the driver (default) and on Spark (``tau=0``). With
``--big-scale`` the same for a larger trace (queries and stores reused).

The mapped files are what the index build writes with
:func:`provplug.index.mapped.write_mapped`; a store indexed before it
did gets them here (``--no-write-mapped``: leave the store as it is).

    python examples/benchmarks/query_bench.py --scale 1.0 --big-scale 9.0

Writes examples/benchmarks/query.md (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.dataset as pads

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import provplug  # noqa: E402
from provplug.index import build_index, current_dir, mapped, read_meta  # noqa: E402
from provplug.index.mapped import gather_ranges  # noqa: E402
from provplug.query import index_reader  # noqa: E402
from provplug.store.open import open_store  # noqa: E402

CLASSES = {"SC-SL": (100, 200), "LC-SL": (100, 200), "LC-LL": (5_000, 10_000)}


def prepare(path: Path, scale: float, seed: int, theta: int, write_mapped: bool = True) -> dict[str, Any]:
    """Generate and index the trace unless ``path`` already holds it indexed;
    write the generation's mapped files unless it has them."""
    import paper_trace

    timings: dict[str, Any] = {}
    if not path.exists():
        t0 = time.perf_counter()
        paper_trace.generate(path, scale, seed)
        timings["generate_s"] = round(time.perf_counter() - t0, 1)
    store = open_store(path)
    if read_meta(store) is None:
        t0 = time.perf_counter()
        build_index(store, theta=theta)
        timings["index_s"] = round(time.perf_counter() - t0, 1)
    meta = read_meta(store) or {}
    gen = current_dir(store)
    if write_mapped and not Path(gen, mapped.MAPPED_MANIFEST).exists():
        import pyarrow.fs as pafs

        t0 = time.perf_counter()
        written = mapped.write_mapped(pafs.LocalFileSystem(), gen, meta.get("buckets"))
        timings["mapped_s"] = round(time.perf_counter() - t0, 1)
        timings["mapped_bytes"] = sum(written.values())
    return {"meta": meta, **timings}


class Ancestry:
    """Independent CSR of the whole graph (dst -> parents; ``down``: src -> children) to pick queries."""

    def __init__(self, store: Any, direction: str = "up") -> None:
        t = store.triples().to_table(columns=["src", "dst"])
        src, dst = t.column("src").to_numpy(), t.column("dst").to_numpy()
        self.n = int(max(src.max(), dst.max())) + 1
        frm, to = (dst, src) if direction == "up" else (src, dst)
        order = np.argsort(frm, kind="stable")
        self.parents = to[order]
        self.indptr = np.concatenate([[0], np.cumsum(np.bincount(frm, minlength=self.n))])
        self.triples = len(src)
        self.src, self.dst = src, dst

    def near_wide_fanin(self, min_parents: int = 10, hops: int = 3) -> np.ndarray:
        """Values with >= ``min_parents`` parents and their descendants up to
        ``hops`` steps: in the trace only these have 100+ ancestors."""
        marked = np.diff(self.indptr) >= min_parents
        for _ in range(hops):
            marked[self.dst[marked[self.src]]] = True
        return np.flatnonzero(marked)

    def count(self, value: int, limit: int = 20_000) -> int:
        seen = np.zeros(self.n, dtype=bool)
        frontier = np.array([value])
        total = 0
        while len(frontier) and total <= limit:
            step = np.unique(self.parents[gather_ranges(self.indptr[frontier], self.indptr[frontier + 1])])
            step = step[~seen[step]]
            seen[step] = True
            total += len(step)
            frontier = step
        return total


def pick_queries(path: Path, per_class: int, seed: int) -> dict[str, list[int]]:
    store = open_store(path)
    gen = current_dir(store)
    comps = pads.dataset(f"{gen}/components.parquet").to_table().to_pandas()
    sets = pads.dataset(f"{gen}/sets.parquet").to_table(columns=["csid", "ccid"]).to_pandas()
    values = (
        pads.dataset(f"{gen}/value_sets", format="parquet", partitioning="hive")
        .to_table(columns=["value_id", "ccid"])
        .to_pandas()
    )
    largest = int(comps.sort_values("nodes", ascending=False).iloc[0]["ccid"])
    single_set = set(sets.groupby("ccid").size().loc[lambda s: s == 1].index)
    small = comps[(comps["nodes"] >= 900) & comps["ccid"].isin(single_set)]["ccid"]
    ancestry = Ancestry(store)
    rng = np.random.default_rng(seed)
    pools: dict[str, Any] = {
        "SC-SL": values[values["ccid"].isin(set(small))]["value_id"].to_numpy(),
        "LC-SL": values[values["ccid"] == largest]["value_id"].to_numpy(),
    }
    # Most values have < 50 ancestors; the classes live around the wide fan-in values.
    pools["LC-SL"] = np.intersect1d(pools["LC-SL"], ancestry.near_wide_fanin())
    # LC-LL values are rare (a handful per large component): top up from the
    # other large (partitioned) components when the largest has too few.
    others = comps.sort_values("nodes", ascending=False).iloc[1:3]["ccid"]
    more = np.intersect1d(values[values["ccid"].isin(set(others))]["value_id"].to_numpy(), ancestry.near_wide_fanin())
    pools["LC-LL"] = (pools["LC-SL"], more)
    chosen: dict[str, list[int]] = {}
    for cls, (lo, hi) in CLASSES.items():
        pool_parts = pools[cls] if isinstance(pools[cls], tuple) else (pools[cls],)
        pool = np.concatenate([rng.permutation(part) for part in pool_parts])
        picked: list[int] = []
        for v in pool[:200_000].tolist():
            if lo <= ancestry.count(v, hi) <= hi:
                picked.append(int(v))
                if len(picked) == per_class:
                    break
        chosen[cls] = picked
    return chosen


def duckdb_runner(path: Path) -> Any:
    """``run(value, direction)``: DuckDB's recursive CTE over the same triples
    (an in-memory table), returning the lineage's triples; the count of lineage values."""
    import duckdb

    store = open_store(path)
    con = duckdb.connect()
    con.execute("CREATE TABLE triples AS SELECT src, dst, op FROM read_parquet(?)", [store.triple_files()])
    sql = {
        "up": """
            WITH RECURSIVE anc(id) AS (
                SELECT ?::BIGINT
                UNION
                SELECT t.src FROM triples t JOIN anc ON t.dst = anc.id
            )
            SELECT t.src, t.dst, t.op FROM triples t WHERE t.dst IN (SELECT id FROM anc)
        """,
        "down": """
            WITH RECURSIVE des(id) AS (
                SELECT ?::BIGINT
                UNION
                SELECT t.dst FROM triples t JOIN des ON t.src = des.id
            )
            SELECT t.src, t.dst, t.op FROM triples t WHERE t.src IN (SELECT id FROM des)
        """,
    }

    def run(value: int, direction: str = "up") -> int:
        rows = con.execute(sql[direction], [value]).fetchall()
        return len({r[0 if direction == "up" else 1] for r in rows} - {value})

    return run


def timed(fn: Any, runs: int, warmups: int = 2) -> tuple[float, Any]:
    # Driver path: the first touch reads filtered (the cold path), the second
    # loads buckets sorted and keeps them (warm from then on).
    for _ in range(warmups):
        fn()
    times, out = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def bench_warm(path: Path, queries: dict[str, list[int]], runs: int, spark: Any, slow_queries: int) -> dict[str, Any]:
    """``slow_queries``: how many of each class's queries RQ and CCProv run
    (on Spark each takes seconds; the others run all of them)."""
    opened = provplug.open(path)
    duck = duckdb_runner(path)
    results: dict[str, dict[str, Any]] = {}
    for cls, values in queries.items():
        per: dict[str, list[float]] = {"auto": [], "csprov": [], "ccprov": [], "rq": [], "duckdb": []}
        detail: dict[str, Any] = {
            "ancestors": [],
            "sets_read": [],
            "csprov_triples": [],
            "ccprov_triples": [],
            "paths": {},
            "csprov_of_slow": [],
        }
        for i, v in enumerate(values):
            expected = None
            for method in ("auto", "csprov", "ccprov", "rq"):
                if method in ("rq", "ccprov") and i >= slow_queries:
                    continue
                warmups = 1 if method in ("rq", "ccprov") else 2  # Spark-path methods need no second warm-up
                t, ans = timed(lambda m=method, v=v: opened.lineage(value_id=v, method=m, spark=spark), runs, warmups)
                per[method].append(t)
                detail["paths"].setdefault(method, set()).add(ans.stats["path"])
                if expected is None:
                    expected = ans.value_ids
                    detail["ancestors"].append(len(expected))
                    detail["sets_read"].append(ans.stats["sets_read"])
                assert ans.value_ids == expected, (cls, v, method)
                if method in ("csprov", "ccprov"):
                    detail[f"{method}_triples"].append(ans.stats["triples_scanned"])
            if i < slow_queries:
                detail["csprov_of_slow"].append(per["csprov"][-1])
            t, n = timed(lambda v=v: duck(v), runs)
            assert expected is not None, (cls, v, "no method answered")
            assert n == len(expected), (cls, v, "duckdb", n, len(expected))
            per["duckdb"].append(t)
            print(
                f"  {cls} value {v}: {len(expected)} ancestors, "
                + ", ".join(f"{m} {per[m][-1] * 1000:.1f} ms" for m in per if len(per[m]) == i + 1),
                flush=True,
            )
        detail["paths"] = {m: sorted(p) for m, p in detail["paths"].items()}
        # Ratios on the same queries: RQ's median over its queries vs CSProv's over those.
        slow = detail.pop("csprov_of_slow")
        detail["csprov_slow_median_s"] = statistics.median(slow) if slow else None
        results[cls] = {"median_s": {m: statistics.median(ts) for m, ts in per.items() if ts}, **detail}
    return results


def with_mapped(on: bool) -> None:
    """Read the mapped index files (True) or the Parquet buckets (False), in this process and its children."""
    if on:
        os.environ.pop(index_reader.MAPPED_ENV, None)
    else:
        os.environ[index_reader.MAPPED_ENV] = "0"


def bench_directions(path: Path, queries: dict[str, list[int]], runs: int) -> dict[str, Any]:
    """Warm ``auto`` per class and direction, reading mapped files and Parquet
    buckets (default cache), against DuckDB; every answer checked equal."""
    opened = provplug.open(path)
    duck = duckdb_runner(path)
    out: dict[str, Any] = {}
    for cls, values in queries.items():
        for direction in ("up", "down"):
            per: dict[str, list[float]] = {"mapped": [], "parquet": [], "duckdb": []}
            sizes, paths = [], set()
            for v in values:
                expected = None
                for mode in ("mapped", "parquet"):
                    with_mapped(mode == "mapped")
                    t, ans = timed(lambda v=v, d=direction: opened.lineage(value_id=v, direction=d), runs)
                    per[mode].append(t)
                    paths.add(ans.stats["path"])
                    expected = ans.value_ids if expected is None else expected
                    assert ans.value_ids == expected, (cls, v, direction, mode)
                assert expected is not None
                t, n = timed(lambda v=v, d=direction: duck(v, d), runs)
                assert n == len(expected), (cls, v, direction, "duckdb", n, len(expected))
                per["duckdb"].append(t)
                sizes.append(len(expected))
            with_mapped(True)
            out[f"{cls} {direction}"] = {
                "median_s": {m: statistics.median(ts) for m, ts in per.items()},
                "lineage": int(statistics.median(sizes)),
                "paths": sorted(paths),
            }
            print(
                f"  {cls} {direction}: "
                + ", ".join(f"{m} {statistics.median(ts) * 1000:.1f} ms" for m, ts in per.items()),
                flush=True,
            )
    out["cache"] = index_reader.cache_usage(opened.store)
    return out


def bench_cold(path: Path, queries: dict[str, list[int]], runs: int) -> dict[str, float]:
    """Median wall time of a fresh ``provplug lineage`` process per query, per class, direction and reading."""
    out = {}
    exe = Path(sys.executable).with_name("provplug")
    for mode in ("mapped", "parquet"):
        with_mapped(mode == "mapped")
        for cls, values in queries.items():
            for direction in ("up", "down"):
                times = []
                for v in values[:runs]:
                    t0 = time.perf_counter()
                    subprocess.run(
                        [str(exe), "lineage", str(path), "--value-id", str(v), "--direction", direction, "--json"],
                        check=True,
                        stdout=subprocess.DEVNULL,
                    )
                    times.append(time.perf_counter() - t0)
                out[f"{mode} {cls} {direction}"] = statistics.median(times)
    with_mapped(True)
    return out


def bench_largest_set(path: Path, spark: Any, spark_runs: int, unit: str = "set") -> dict[str, Any]:
    """The largest connected set (``unit`` "set", CSProv) or component
    ("component", CCProv: it reads the whole component): a value of it with
    the fewest descendants (2 if there is one), queried downstream on the
    driver (the default) and on Spark (tau=0)."""
    store = open_store(path)
    gen = current_dir(store)
    key, table, method = ("csid", "sets", "csprov") if unit == "set" else ("ccid", "components", "ccprov")
    sets = pads.dataset(f"{gen}/{table}.parquet").to_table(columns=[key, "triples"]).to_pandas()
    big = sets.sort_values("triples", ascending=False).iloc[0]
    csid, triples = int(big[key]), int(big["triples"])
    values = (
        pads.dataset(f"{gen}/value_sets", format="parquet", partitioning="hive")
        .to_table(columns=["value_id"], filter=pads.field(key) == csid)
        .column("value_id")
        .to_numpy()
    )
    children = Ancestry(store, "down")
    best: tuple[int, int] | None = None
    for v in np.random.default_rng(0).permutation(values)[:20_000].tolist():
        n = children.count(v, 10)
        if 1 <= n <= 10 and (best is None or abs(n - 2) < abs(best[1] - 2)):
            best = (int(v), n)
        if best is not None and best[1] == 2:
            break
    del children
    assert best is not None
    value, n = best
    opened = provplug.open(path)  # a new store: its query cache is empty
    t0 = time.perf_counter()
    first = opened.lineage(value_id=value, direction="down", method=method)
    first_t = time.perf_counter() - t0
    driver_t, ans = timed(lambda: opened.lineage(value_id=value, direction="down", method=method), 3, warmups=1)
    assert len(ans.value_ids) == n and first.value_ids == ans.value_ids, (value, n, len(ans.value_ids))
    t0 = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "provplug",
            "lineage",
            str(path),
            "--value-id",
            str(value),
            "--direction",
            "down",
            "--method",
            method,
            "--json",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    cli_t = time.perf_counter() - t0
    result: dict[str, Any] = {
        "unit": unit,
        "method": method,
        "csid": csid,
        "set_triples": triples,
        "value": value,
        "descendants": n,
        "driver_s": driver_t,
        "driver_first_s": first_t,
        "cli_s": cli_t,
        "driver_path": ans.stats["path"],
        "triples_scanned": ans.stats["triples_scanned"],
    }
    if spark_runs:
        times = []
        for _ in range(spark_runs):
            t0 = time.perf_counter()
            on_spark = opened.lineage(value_id=value, direction="down", method=method, tau=0, spark=spark)
            times.append(time.perf_counter() - t0)
            assert on_spark.value_ids == ans.value_ids and on_spark.stats["path"] == "spark"
        result["spark_s"] = statistics.median(times)
    print(
        f"  largest {unit} {csid} ({triples:,} triples), {method}: value {value}, {n} descendants, "
        f"{ans.stats['triples_scanned']:,} triples scanned: {ans.stats['path']} {driver_t:.2f} s warm median "
        f"({first_t:.2f} s first call, cold CLI {cli_t:.2f} s), spark {result.get('spark_s', float('nan')):.2f} s",
        flush=True,
    )
    return result


def local_spark() -> Any:
    from provplug.sparksession import local_spark as start

    return start(
        "provplug-query-bench", "local[2]", **{"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "6g"}
    )


def ms(x: float) -> str:
    return f"{x * 1000:.1f}"


def median_of(values: list[int]) -> str:
    return f"{int(statistics.median(values)):,}" if values else "-"


def warm_table(sec: dict[str, Any]) -> list[str]:
    lines = [
        f"Ancestors, every method (RQ and CCProv on the first {sec['slow']} queries of each class; RQ / CSProv "
        "compares medians over those same queries):",
        "",
        "| class | ancestors (median) | auto ms | CSProv ms | CCProv ms | RQ ms | DuckDB ms | RQ / CSProv | DuckDB / CSProv "
        "| sets read | triples scanned CSProv / CCProv | paths |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for cls, r in sec["warm"].items():
        m = r["median_s"]
        rq, cc, cs_same = m.get("rq"), m.get("ccprov"), r["csprov_slow_median_s"]
        ratio = f"{rq / cs_same:.0f}x" if rq and cs_same else "-"
        lines.append(
            f"| {cls} | {median_of(r['ancestors'])} | {ms(m['auto'])} | {ms(m['csprov'])} | {ms(cc) if cc else '-'} | "
            f"{ms(rq) if rq else '-'} | {ms(m['duckdb'])} | {ratio} | {m['duckdb'] / m['csprov']:.1f}x | "
            f"{median_of(r['sets_read'])} | {median_of(r['csprov_triples'])} / {median_of(r['ccprov_triples'])} | "
            + ", ".join(f"{k}: {'/'.join(v)}" for k, v in r["paths"].items())
            + " |"
        )
    return lines


def directions_table(sec: dict[str, Any]) -> list[str]:
    cache = sec["directions"].get("cache", {})
    lines = [
        "`auto` (the default) per class and direction, reading the mapped files and reading the Parquet buckets "
        f"(default query cache: {cache.get('budget', 0) / 2**30:.1f} GiB here, {cache.get('evictions', 0)} evictions), "
        "against DuckDB:",
        "",
        "| class | direction | lineage (median) | mapped ms | Parquet ms | DuckDB ms | DuckDB / mapped | DuckDB / Parquet | path |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key, r in sec["directions"].items():
        if key == "cache":
            continue
        cls, direction = key.split(" ")
        m = r["median_s"]
        lines.append(
            f"| {cls} | {'ancestors' if direction == 'up' else 'descendants'} | {r['lineage']:,} | {ms(m['mapped'])} | "
            f"{ms(m['parquet'])} | {ms(m['duckdb'])} | {m['duckdb'] / m['mapped']:.1f}x | "
            f"{m['duckdb'] / m['parquet']:.1f}x | {'/'.join(r['paths'])} |"
        )
    return lines


def cold_table(sec: dict[str, Any]) -> list[str]:
    cold = sec["cold"]
    lines = [
        "Cold `provplug lineage STORE --value-id V [--direction down] --json` (a new process per query; the OS "
        "page cache warm), median wall seconds:",
        "",
        "| class | direction | mapped s | Parquet s |",
        "|---|---|---|---|",
    ]
    for key, t in cold.items():
        mode, cls, direction = key.split(" ")
        if mode == "mapped":
            lines.append(
                f"| {cls} | {'ancestors' if direction == 'up' else 'descendants'} | {t:.2f} | "
                f"{cold.get(f'parquet {cls} {direction}', float('nan')):.2f} |"
            )
    return lines


def largest_set_lines(sec: dict[str, Any]) -> list[str]:
    r = sec.get("largest_set")
    if not r:
        return []
    spark = f"{r['spark_s']:.1f} s" if "spark_s" in r else "not run"
    return [
        f"Largest connected set ({r['set_triples']:,} triples): value {r['value']}, {r['descendants']} descendants, "
        f"{r['triples_scanned']:,} triples scanned. Default (`auto`, path: {r['driver_path']}): "
        f"{r['driver_s']:.2f} s warm median; on Spark (`--tau 0`): {spark}.",
    ]


def report(sections: list[dict[str, Any]], command: str, out: Path) -> None:
    lines = [
        "# Lineage query benchmark",
        "",
        "Paper-shaped trace (`examples/benchmarks/paper_trace.py`), indexed with theta = 25,000 nodes and",
        "automatic splits. Warm latencies: each query run twice to warm, then timed runs; a query's time",
        "is the median of its runs, a class's figure the median over its queries. All methods and DuckDB",
        "(in-memory table, `WITH RECURSIVE ... UNION`, returning the lineage and its triples) run in one",
        "process on this shared 2-core machine; every method's answer was checked equal (and DuckDB's",
        "lineage count). `auto` = CSProv, on the driver when the query's triples fit the driver's memory",
        "budget, else on Spark (path shown). Mapped = the generation's mapped index files",
        "(`mapped.write_mapped`); Parquet = the same queries with `PROVPLUG_QUERY_MAPPED=0`.",
        "",
        "Reproduce:",
        "",
        f"    {command}",
        "",
    ]
    for sec in sections:
        counts = sec["meta"].get("counts", {})
        mapped = f", mapped files {sec['mapped_s']} s ({sec['mapped_bytes'] / 1e9:.2f} GB)" if "mapped_s" in sec else ""
        lines += [
            f"## {counts.get('triples', 0):,} triples (scale {sec['scale']})",
            "",
            f"{counts.get('values', 0):,} values, {counts.get('components', 0):,} components, "
            f"{counts.get('sets', 0):,} sets, {counts.get('set_dependencies', 0):,} set dependencies; "
            f"generate {sec.get('generate_s', '-')} s, index {sec.get('index_s', '-')} s{mapped} (if built in this run).",
            "",
        ]
        for part in (warm_table, directions_table, cold_table, largest_set_lines):
            if part is not warm_table or sec.get("warm"):
                lines += [*part(sec), ""]
        lines += [f"Load average during the run (shared machine): {', '.join(f'{x:.1f}' for x in sec['loadavg'])}.", ""]
    out.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--big-scale", type=float, default=None, help="also run a larger trace (9.0 gives ~63M triples)")
    p.add_argument("--data", type=Path, default=HERE / "data")
    p.add_argument("--queries", type=int, default=10)
    p.add_argument("--slow-queries", type=int, default=2, help="how many of each class's queries RQ and CCProv run")
    p.add_argument("--big-queries", type=int, default=5, help="queries per class on the big trace")
    p.add_argument("--big-slow-queries", type=int, default=0)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--spark-runs", type=int, default=1, help="runs of the largest-set query on Spark (0: skip)")
    p.add_argument("--theta", type=int, default=25_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-write-mapped", action="store_true", help="do not add mapped files to a store without them")
    p.add_argument("--out", type=Path, default=HERE / "query.md")
    p.add_argument(
        "--largest-only",
        metavar="STORE",
        type=Path,
        help="only the largest set's and largest component's 2-descendant queries on this indexed "
        "store, printed (the report is not rewritten)",
    )
    args = p.parse_args(argv)
    spark = local_spark()
    if args.largest_only:
        try:
            for unit in ("set", "component"):
                print(json.dumps(bench_largest_set(args.largest_only, spark, args.spark_runs, unit), default=str))
        finally:
            spark.stop()
        return 0
    sections = []
    command = "python " + " ".join([os.path.relpath(__file__), *(argv if argv is not None else sys.argv[1:])])
    try:
        plan = [(args.scale, args.queries, args.slow_queries)]
        if args.big_scale:
            plan.append((args.big_scale, args.big_queries, args.big_slow_queries))
        for scale, n_queries, n_slow in plan:
            path = args.data / f"query-trace-{scale:g}.prov"
            print(f"trace scale {scale} at {path}", flush=True)
            sec: dict[str, Any] = {
                "scale": scale,
                "slow": n_slow,
                **prepare(path, scale, args.seed, args.theta, not args.no_write_mapped),
            }
            queries = pick_queries(path, n_queries, args.seed)
            print("queries:", json.dumps(queries), flush=True)
            sec["queries"] = queries
            if n_slow:
                sec["warm"] = bench_warm(path, queries, args.runs, spark, n_slow)
            sec["directions"] = bench_directions(path, queries, args.runs)
            sec["cold"] = bench_cold(path, queries, args.runs)
            sec["largest_set"] = bench_largest_set(path, spark, args.spark_runs)
            sec["loadavg"] = os.getloadavg()
            sections.append(sec)
            (args.out.with_suffix(".json")).write_text(json.dumps(sections, indent=1, default=str))
            report(sections, command, args.out)
    finally:
        spark.stop()
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
