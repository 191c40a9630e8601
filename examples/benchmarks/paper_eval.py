"""The core paper's evaluation (000 §4, 002 §V), reproduced in its format.

1. The paper-shaped trace (``paper_trace.py``) at scale 1 (about 7M triples,
   the paper's "10M" = 4.6M nodes + 6.4M edges) and its replicas by the
   paper's factors (9x, 24x; copy k's ids shifted so copies share no value,
   one import run per copy), imported and indexed (theta = 25,000 nodes; the
   1x store's automatic splits for every factor). Import and index run as
   child processes: wall time and peak RSS each.
2. Table 9's shape: per large component and split the sets of W(sp, LC), how
   many have >= 1000 nodes and the largest; a set still >= theta is shown
   re-partitioned on its sub-splits in a row of its own (the paper's
   LC2_lc1). Set dependencies against triples, counts and bytes on disk.
3. The query classes by the paper's rules on the 1x trace, with an
   independent breadth-first search: SC-SL (a component below theta),
   LC-SL and LC-LL (large components); ancestors and lineage triples both in
   100-200, resp. 5,000-10,000. The same values' copies are queried at the
   larger factors (query i in copy i mod f), and every answer must have the
   1x answer's size.
4. Tables 10-12 (RAM: each query once to warm, then timed; the index and
   RQ's triple table cached) and Table XIII (disk: every provplug cache and
   every cached Spark DataFrame dropped before each query), mean over the
   queries of a class, for RQ, CCProv and CSProv, beside DuckDB's recursive
   CTE over the same triples; plus CSProv in a fresh process (the CLI).

Everything it builds stays under ``--data`` (gitignored) and is reused, so
a run can be resumed and factors added later; measured figures are merged
into ``--data``/paper-eval-results.json and the report (``--out``) is
rewritten from all of them; runs of different factors may go at once
(each merges the others' saved figures). For example (the runs of
paper_eval.md)::

    python examples/benchmarks/paper_eval.py --factors 24 --prepare-only --index-memory 8G
    python examples/benchmarks/paper_eval.py --factors 1 --directions up,down --slow-queries 3 --cli-queries 3
    python examples/benchmarks/paper_eval.py --factors 24 --directions up,down --big-slow-queries 2 \
        --big-methods ccprov --cli-queries 3
    python examples/benchmarks/paper_eval.py --factors 1,9,24 --directions up,down --duckdb-only \
        --duckdb-memory none --duckdb-threads 1 --big-duckdb-runs 1

A generation without mapped index files (built by an older provplug) counts
as stale and is re-indexed.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import paper_trace  # noqa: E402  (the generator beside this file)

# class -> (component kind, lo, hi): ancestors and lineage triples both in [lo, hi].
CLASSES: dict[str, tuple[str, int, int]] = {
    "SC-SL": ("small", 100, 200),
    "LC-SL": ("large", 100, 200),
    "LC-LL": ("large", 5_000, 10_000),
}
METHODS = ("rq", "ccprov", "csprov")
LABEL = {
    "rq": "RQ",
    "ccprov": "CCProv",
    "csprov": "CSProv",
    "duckdb": "DuckDB (recursive CTE)",
    "csprov_cli": "CSProv, fresh process (CLI)",
    "csprov_cold": "CSProv, fresh process (CLI), store's pages evicted",
}
# The paper's figures (seconds; 000 Tables 10-12, 002 Table XIII), by factor.
PAPER_RAM = {
    "SC-SL": {"rq": (2.3, 8.9, 10.8, 16.5), "ccprov": (0.3, 0.4, 0.6, 0.9), "csprov": (0.3, 0.4, 0.6, 0.9)},
    "LC-SL": {"rq": (2.1, 8.3, 11.4, 16.0), "ccprov": (2.3, 5.0, 6.2, 7.9), "csprov": (0.6, 0.8, 1.1, 1.6)},
    "LC-LL": {"rq": (2.7, 9.1, 12.7, 20.0), "ccprov": (2.5, 5.5, 7.0, 9.1), "csprov": (0.8, 1.3, 1.7, 2.2)},
}
PAPER_DISK = {"LC-LL": {"rq": (7, 20, 47, 101), "ccprov": (5.5, 9, 16, 31), "csprov": (3, 6, 11, 17)}}
PAPER_FACTORS = (1, 9, 24, 48)
PAPER_SIZE = {1: "10M", 9: "100M", 24: "250M", 48: "500M"}
PAPER_PREPROCESS = {1: "6 min (WCC only)", 9: "16 min", 24: "28 min", 48: "50 min"}
PAPER_LARGE = {1: 3, 9: 27, 24: 72, 48: 144}
BIG_SET = 1000  # Table 9's middle figure: sets with at least this many nodes
NOTES = "## Notes (written by hand)"  # this section of the report survives re-rendering


# -- child processes ------------------------------------------------------------------


def run_child(cmd: list[str], log: Path) -> tuple[float, int]:
    """Run ``cmd`` (output appended to ``log``); its wall time and peak RSS in bytes."""
    with open(log, "a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=out)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)} (see {log})")
    return time.perf_counter() - t0, int(usage.ru_maxrss) * 1024


def provplug_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "provplug", *args]


# -- stores: generate, import, index (resumable) --------------------------------------


@dataclass
class Options:
    data: Path
    scale: float
    seed: int
    theta: int
    engine: str
    index_memory: str | None = None  # the local engine's --memory-budget (None: provplug's default)

    def store(self, factor: int) -> Path:
        return self.data / f"paper-eval-x{factor}.prov"

    def state_file(self, factor: int) -> Path:
        return self.data / f"paper-eval-x{factor}.state.json"

    @property
    def log(self) -> Path:
        return self.data / "paper-eval.log"


def load_json(path: Path, default: Any) -> Any:
    return json.loads(path.read_text()) if path.exists() else default


def save_json(path: Path, value: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value, indent=1, default=str))
    tmp.replace(path)


def prepare(opts: Options, factor: int, splits: Path | None) -> dict[str, Any]:
    """Import the missing copies and (re)build a missing or stale index."""
    from provplug.index import read_meta
    from provplug.store.open import open_store

    state_path = opts.state_file(factor)
    state: dict[str, Any] = load_json(
        state_path, {"factor": factor, "scale": opts.scale, "seed": opts.seed, "copies": []}
    )
    if (state["scale"], state["seed"]) != (opts.scale, opts.seed):
        raise SystemExit(
            f"{opts.store(factor)} holds scale {state['scale']} seed {state['seed']}: delete it and its state file"
        )
    path = opts.store(factor)
    runs = [m["run_id"] for m in open_store(path).runs()] if path.exists() else []
    if len(runs) > factor:
        raise SystemExit(f"{path} holds {len(runs)} runs, more than {factor} copies: delete it and its state file")
    known = {c["run_id"] for c in state["copies"]}
    state["copies"] += [
        {"copy": i, "run_id": r, "seconds": None, "rss": None} for i, r in enumerate(runs) if r not in known
    ]
    arrays = None
    for copy in range(len(runs), factor):
        arrays = arrays or paper_trace.generate_arrays(opts.scale, opts.seed)
        tp, vp = paper_trace.write_files(str(opts.data), copy=copy, arrays=arrays)
        print(f"x{factor}: importing copy {copy + 1}/{factor}", flush=True)
        seconds, rss = run_child(provplug_cmd("import", str(path), "--triples", tp, "--values", vp), opts.log)
        run_id = [m["run_id"] for m in open_store(path).runs()][-1]
        state["copies"].append({"copy": copy, "run_id": run_id, "seconds": round(seconds, 1), "rss": rss})
        save_json(state_path, state)
        os.remove(tp)
        os.remove(vp)
    store = open_store(path)
    meta = read_meta(store)
    fresh = (
        meta is not None
        and set(meta["runs"]) == {m["run_id"] for m in store.runs()}
        and meta["theta"] == opts.theta
        and has_mapped_files(store)
    )
    if not fresh or (splits is not None and meta is not None and meta["splits"] != json.loads(splits.read_text())):
        print(f"x{factor}: indexing ({opts.engine})", flush=True)
        cmd = provplug_cmd(
            "index",
            str(path),
            "--theta",
            str(opts.theta),
            "--engine",
            opts.engine,
            *(["--memory-budget", opts.index_memory] if opts.index_memory else []),
        )
        seconds, rss = run_child([*cmd, *(["--splits", str(splits)] if splits else [])], opts.log)
        meta = read_meta(open_store(path)) or {}
        state["index"] = {
            "wall": round(seconds, 1),
            "seconds": meta["seconds"],
            "rss": rss,
            "engine": meta["engine"],
            "generation": meta["generation"],
        }
        save_json(state_path, state)
    return state


def has_mapped_files(store: Any) -> bool:
    """Whether the live generation has its mapped files (built by a provplug
    that writes them: queries on an older one would read Parquet instead)."""
    from provplug.index import current_dir
    from provplug.index.mapped import MAPPED_MANIFEST

    return Path(current_dir(store), MAPPED_MANIFEST).exists()


# -- Table 9: sets per large component and split ---------------------------------------


@dataclass
class Cell:
    split: str
    sets: int
    big: int
    largest: int

    def text(self) -> str:
        return f"{self.split}: {self.sets:,}, {self.big:,}, {self.largest:,}"


@dataclass
class Row:
    name: str
    nodes: int
    triples: int
    cells: list[Cell]
    final_sets: int  # the sets of this component (or re-partitioned set) in the index
    parts: list[str]  # the rows of its re-partitioned sets


def index_tables(store: Any, ccid_below: int | None) -> tuple[Any, Any, Any]:
    """``sets`` (of partitioned components) and ``components`` as DataFrames and
    the set dependencies (src_csid, dst_csid), of the components whose ccid is
    below ``ccid_below`` (all when None)."""
    import pyarrow.compute as pc
    import pyarrow.dataset as pads
    import pyarrow.parquet as pq

    from provplug.index import current_dir

    gen = current_dir(store)
    sets = pq.read_table(f"{gen}/sets.parquet", columns=["csid", "ccid", "split", "nodes", "triples"])
    comps = pq.read_table(f"{gen}/components.parquet")
    deps = pads.dataset(f"{gen}/setdeps", format="parquet", partitioning="hive")
    flt = None
    if ccid_below is not None:
        sets = sets.filter(pc.less(sets["ccid"], ccid_below))
        comps = comps.filter(pc.less(comps["ccid"], ccid_below))
        flt = pc.field("dst_csid") < ccid_below  # a set's csid is at least its component's ccid
    sets = sets.filter(pc.is_valid(sets["split"]))
    return sets.to_pandas(), comps.to_pandas(), deps.to_table(columns=["src_csid", "dst_csid"], filter=flt)


def split_children(tree: list[dict[str, Any]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}

    def visit(node: dict[str, Any]) -> None:
        out[node["name"]] = [c["name"] for c in node["children"]]
        for c in node["children"]:
            visit(c)

    for node in tree:
        visit(node)
    return out


def under(labels: Any, split: str) -> Any:
    """Sets produced by ``split`` or one of its sub-splits (at any depth)."""
    return (labels == split) | labels.str.startswith(split + ".")


def level_groups(sets: Any, deps: Any, split: str) -> Any:
    """For the sets produced at or below ``split``: the member of W(split, .)
    each belongs to. Those are the weakly connected pieces of the set
    dependencies among them: two sets of one piece of G[V(split, c)] are
    linked by its triples, and no triple links two pieces. A Series csid ->
    piece id (its smallest csid)."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    from provplug.index.localwcc import wcc_labels

    members = sets[under(sets["split"], split)].sort_values("csid")
    ids = members["csid"].to_numpy()
    known = pa.array(ids, pa.int64())
    inner = deps.filter(pc.and_(pc.is_in(deps["src_csid"], known), pc.is_in(deps["dst_csid"], known)))
    a = np.searchsorted(ids, inner["src_csid"].to_numpy())
    b = np.searchsorted(ids, inner["dst_csid"].to_numpy())
    return pd.Series(ids[wcc_labels(len(ids), a, b)], index=ids)


def table9(store: Any, theta: int, tree: list[dict[str, Any]], ccid_below: int | None = None) -> list[Row]:
    """Table 9's rows: one per large component (LC1 the largest), each
    followed by one per set of it that was still >= theta and re-partitioned
    on sub-splits."""
    sets, comps, deps = index_tables(store, ccid_below)
    children = split_children(tree)
    groups = {name: level_groups(sets, deps, name) for name in children}
    rows: list[Row] = []
    large = comps[comps["nodes"] >= theta].sort_values(["nodes", "ccid"], ascending=[False, True])
    for i, comp in enumerate(large.itertuples(), 1):
        mine = sets[sets["ccid"] == comp.ccid]
        rows += piece_rows(
            f"LC{i}", int(comp.nodes), int(comp.triples), mine, [t["name"] for t in tree], groups, children
        )
    return rows


def piece_rows(
    name: str,
    nodes: int,
    triples: int,
    mine: Any,
    splits: list[str],
    groups: dict[str, Any],
    children: dict[str, list[str]],
) -> list[Row]:
    """The row of one component (or re-partitioned set) ``mine`` over
    ``splits``, followed by the rows of its pieces that were re-partitioned."""
    row = Row(name, nodes, triples, [], len(mine), [])
    below: list[Row] = []
    for split in splits:
        part = mine[under(mine["split"], split)]
        if part.empty:
            continue
        piece = groups[split].loc[part["csid"].to_numpy()].to_numpy()
        sizes = part.groupby(piece).agg(
            nodes=("nodes", "sum"),
            triples=("triples", "sum"),
            deeper=("split", lambda s, sp=split: bool((s != sp).any())),
        )
        row.cells.append(Cell(split, len(sizes), int((sizes["nodes"] >= BIG_SET).sum()), int(sizes["nodes"].max())))
        for pid, p in sizes[sizes["deeper"]].iterrows():
            child = f"{name}_lc{len(row.parts) + 1}"
            row.parts.append(child)
            below += piece_rows(
                child, int(p["nodes"]), int(p["triples"]), part[piece == pid], children[split], groups, children
            )
    return [row, *below]


def check_set_counts(rows: list[Row]) -> None:
    """Acceptance (b): a component's sets in the index are its per-split sets,
    each re-partitioned one replaced by its own per-sub-split sets."""
    by_name = {r.name: r for r in rows}
    for r in rows:
        expected = sum(c.sets for c in r.cells) - len(r.parts) + sum(by_name[n].final_sets for n in r.parts)
        if expected != r.final_sets:
            raise AssertionError(f"{r.name}: {r.final_sets} sets in the index, {expected} from its splits")


def index_summary(store: Any) -> dict[str, Any]:
    from provplug.index import read_meta

    meta = read_meta(store) or {}
    files = meta.get("files", {})
    size = {k: sum(v for p, v in files.items() if p.startswith(k + "/")) for k in ("triples", "setdeps", "value_sets")}
    stored = sum(os.path.getsize(f) for f in store.triple_files())
    return {
        "counts": meta["counts"],
        "bytes": {**size, "store_triples": stored},
        "splits": meta["splits"],
        "split_tree": meta["split_tree"],
        "seconds": meta["seconds"],
        "engine": meta["engine"],
    }


# -- query classes (1x trace, independent BFS) ------------------------------------------


def concat_ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    lengths = ends - starts
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    offsets = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    return offsets + np.arange(total, dtype=np.int64)


class TraceGraph:
    """The triples as two CSR adjacencies over dense ids (up: dst -> parents)."""

    def __init__(self, src: np.ndarray, dst: np.ndarray) -> None:
        self.nodes, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
        n, m = len(self.nodes), len(src)
        s, d = inverse[:m].astype(np.int64), inverse[m:].astype(np.int64)
        self.csr = {"up": self._csr(d, s, n), "down": self._csr(s, d, n)}
        self.mark = np.zeros(n, dtype=np.int64)
        self.stamp = 0

    @staticmethod
    def _csr(frm: np.ndarray, to: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(frm, kind="stable")
        return np.concatenate([[0], np.cumsum(np.bincount(frm, minlength=n))]), to[order]

    def dense(self, values: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.nodes, values)

    def upper_bound(self, direction: str) -> np.ndarray:
        """Per value, the number of paths into it (up) or out of it (down): an
        upper bound on its ancestors (descendants), in one topological sweep."""
        indptr, to = self.csr["down" if direction == "up" else "up"]  # walk from the sources
        n = len(self.nodes)
        remaining = np.bincount(to, minlength=n)
        bound = np.zeros(n, dtype=np.float64)
        frontier = np.flatnonzero(remaining == 0)
        while len(frontier):
            edges = concat_ranges(indptr[frontier], indptr[frontier + 1])
            if not len(edges):
                break
            frm = np.repeat(frontier, indptr[frontier + 1] - indptr[frontier])
            bound += np.bincount(to[edges], weights=1.0 + bound[frm], minlength=n)
            remaining -= np.bincount(to[edges], minlength=n)
            nxt = np.unique(to[edges])
            frontier = nxt[remaining[nxt] == 0]
        return bound

    def lineage(self, value: int, direction: str, limit: int) -> tuple[int, int, int]:
        """(values reached, triples among them, BFS rounds) from dense ``value``;
        stops once more than ``limit`` values are reached."""
        indptr, to = self.csr[direction]
        self.stamp += 1
        self.mark[value] = self.stamp
        frontier = np.array([value])
        reached, triples, rounds = 0, int(indptr[value + 1] - indptr[value]), 0
        while len(frontier) and reached <= limit:
            step = np.unique(to[concat_ranges(indptr[frontier], indptr[frontier + 1])])
            step = step[self.mark[step] != self.stamp]
            if not len(step):
                break
            self.mark[step] = self.stamp
            reached += len(step)
            triples += int((indptr[step + 1] - indptr[step]).sum())
            rounds += 1
            frontier = step
        return reached, triples, rounds


@dataclass
class Query:
    value: int  # id in the 1x trace (copy 0)
    component: int
    lineage: int  # ancestors (up) or descendants (down)
    triples: int
    rounds: int
    # "both": lineage values and triples in the class's range; "values": only
    # the values are (the paper's "transformations" read as distinct ops).
    rule: str = "both"


def pick_queries(store: Any, theta: int, per_class: int, seed: int, direction: str, max_checks: int) -> dict[str, Any]:
    """``per_class`` values per class by the paper's rules, and how they were found."""
    import pyarrow.dataset as pads
    import pyarrow.parquet as pq

    from provplug.index import current_dir

    gen = current_dir(store)
    t = store.triples().to_table(columns=["src", "dst"])
    graph = TraceGraph(t.column("src").to_numpy(), t.column("dst").to_numpy())
    del t
    vs = pads.dataset(f"{gen}/value_sets", format="parquet", partitioning="hive").to_table(columns=["value_id", "ccid"])
    comp_of = np.empty(len(graph.nodes), dtype=np.int64)
    comp_of[graph.dense(vs.column("value_id").to_numpy())] = vs.column("ccid").to_numpy()
    del vs
    comps = pq.read_table(f"{gen}/components.parquet").to_pandas().set_index("ccid")
    nodes_of = comps["nodes"].to_numpy()[np.searchsorted(comps.index.to_numpy(), comp_of)]
    bound = graph.upper_bound(direction)
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {}
    for cls, (kind, lo, hi) in CLASSES.items():
        inside = nodes_of >= theta if kind == "large" else nodes_of < theta
        pool = np.flatnonzero(inside & (bound >= lo))
        # Like the paper: the largest component(s) of the kind first (000 draws
        # LC-SL/LC-LL from LC1, SC-SL from one 7,453-node component).
        pool = pool[rng.permutation(len(pool))]
        pool = pool[np.argsort(-nodes_of[pool], kind="stable")]
        picked: list[Query] = []
        values_only: list[Query] = []
        checks = 0
        for v in pool[:max_checks].tolist():
            checks += 1
            n, m, r = graph.lineage(v, direction, hi)
            if lo <= n <= hi:
                query = Query(int(graph.nodes[v]), int(comp_of[v]), n, m, r, "both" if lo <= m <= hi else "values")
                (picked if query.rule == "both" else values_only).append(query)
                if len(picked) == per_class:
                    break
        strict = len(picked)
        # Too few by both counts: top up with values whose lineage values alone
        # are in range (the other reading of "transformations"), marked so.
        picked += values_only[: per_class - len(picked)]
        out[cls] = {
            "queries": [asdict(q) for q in picked],
            "pool": len(pool),
            "checked": checks,
            "strict": strict,
            "components": sorted({q.component for q in picked}),
        }
        print(
            f"{direction} {cls}: {strict} + {len(picked) - strict} queries after {checks:,} of {len(pool):,} "
            "candidates",
            flush=True,
        )
    return out


# -- timing ----------------------------------------------------------------------------


def timed(fn: Callable[[], Any], runs: int, warmups: int) -> tuple[float, Any]:
    for _ in range(warmups):
        fn()
    times, out = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def check_answer(answer: Any, q: Query, where: str) -> None:
    if (len(answer.value_ids), len(answer.edges)) != (q.lineage, q.triples):
        raise AssertionError(
            f"{where}: {len(answer.value_ids)} values / {len(answer.edges)} triples, "
            f"expected {q.lineage} / {q.triples} (the 1x BFS)"
        )


def copy_value(q: Query, i: int, factor: int) -> int:
    return q.value + (i % factor) * paper_trace.COPY_STRIDE


def duckdb_runner(
    store: Any, db_path: Path, memory: str, threads: int | None = None
) -> tuple[Any, Callable[[int, str], int]]:
    """DuckDB over the same triples (a database file beside the store, built
    once), the recursive CTE returning the lineage values and their triples.
    ``memory`` "none": no memory limit (DuckDB 2.0.0's recursive CTE over 169M
    triples dies of SIGFPE under one)."""
    import duckdb

    fresh = not db_path.exists()
    con = duckdb.connect(str(db_path))
    if memory != "none":
        con.execute(f"SET memory_limit = '{memory}'")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    if fresh:
        con.execute("CREATE TABLE triples AS SELECT src, dst, op FROM read_parquet(?)", [store.triple_files()])
    sql = {
        "up": "WITH RECURSIVE r(id) AS (SELECT ?::BIGINT UNION SELECT t.src FROM triples t JOIN r ON t.dst = r.id) "
        "SELECT t.src, t.dst, t.op FROM triples t WHERE t.dst IN (SELECT id FROM r)",
        "down": "WITH RECURSIVE r(id) AS (SELECT ?::BIGINT UNION SELECT t.dst FROM triples t JOIN r ON t.src = r.id) "
        "SELECT t.src, t.dst, t.op FROM triples t WHERE t.src IN (SELECT id FROM r)",
    }

    def run(value: int, direction: str) -> int:
        return len(con.execute(sql[direction], [value]).fetchall())

    return con, run


def drop_caches(spark: Any, store: Any) -> None:
    """The disk variant: nothing of the index or of RQ's triple table stays in memory."""
    from provplug.query.index_reader import clear_cache

    clear_cache(store)
    spark.catalog.clearCache()


def jvm_peak_rss(spark: Any) -> int | None:
    """The Spark JVM's peak RSS (VmHWM), when PySpark launched it here."""
    proc = getattr(getattr(spark.sparkContext, "_gateway", None), "proc", None)
    try:
        for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():  # type: ignore[union-attr]
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (AttributeError, OSError):
        return None
    return None


@dataclass
class Bench:
    factor: int
    path: Path
    spark: Any
    runs: int
    slow: int  # RQ, CCProv and DuckDB run the first `slow` queries of a class
    duck: Callable[[int, str], int]
    tau: int | None = None  # None: provplug's default choice of driver or Spark
    slow_methods: tuple[str, ...] = ("rq", "ccprov", "duckdb")  # what runs on the first `slow` queries
    duck_runs: int | None = None  # timed DuckDB runs per query (None: runs)
    cli_queries: int | None = None  # the first this many queries of a class in a fresh process (None: all)
    evict: bool = False  # evict the store's pages from the OS page cache before each CLI query

    def method_series(self, cls: str, queries: list[Query], direction: str) -> Iterator[tuple[str, int, Query, int]]:
        for i, q in enumerate(queries):
            for method in (*METHODS, "duckdb"):
                if method != "csprov" and (i >= self.slow or method not in self.slow_methods):
                    continue
                yield method, i, q, copy_value(q, i, self.factor)

    def ram(self, cls: str, queries: list[Query], direction: str) -> dict[str, Any]:
        import provplug

        opened = provplug.open(self.path)
        out: dict[str, Any] = {m: {"times": [], "paths": [], "scanned": [], "sets": []} for m in (*METHODS, "duckdb")}
        for method, i, q, value in self.method_series(cls, queries, direction):
            where = f"x{self.factor} {direction} {cls} #{i} value {value} {method}"
            if method == "duckdb":
                t, n = timed(functools.partial(self.duck, value, direction), self.duck_runs or self.runs, 1)
                if n != q.triples:
                    raise AssertionError(f"{where}: {n} triples, expected {q.triples}")
                out[method]["times"].append(t)
                continue
            spark_path = method != "csprov"
            query = functools.partial(
                opened.lineage, value_id=value, method=method, direction=direction, spark=self.spark, tau=self.tau
            )
            t, ans = timed(query, 1 if spark_path else self.runs, 1 if spark_path else 2)
            check_answer(ans, q, where)
            record(out[method], t, ans)
            print(f"  {where}: {t * 1000:.1f} ms ({ans.stats['path']})", flush=True)
        return out

    def disk(self, cls: str, queries: list[Query], direction: str) -> dict[str, Any]:
        import provplug

        opened = provplug.open(self.path)
        out: dict[str, Any] = {m: {"times": [], "paths": [], "scanned": [], "sets": []} for m in METHODS}
        for method, i, q, value in self.method_series(cls, queries, direction):
            if method == "duckdb":
                continue
            drop_caches(self.spark, opened.store)
            t0 = time.perf_counter()
            ans = opened.lineage(value_id=value, method=method, direction=direction, spark=self.spark, tau=self.tau)
            t = time.perf_counter() - t0
            check_answer(ans, q, f"x{self.factor} disk {direction} {cls} #{i} {method}")
            record(out[method], t, ans)
        return out

    def cli(self, queries: list[Query], direction: str, first: int = 0) -> list[float]:
        """Wall seconds of ``provplug lineage`` in a fresh process per query
        (``first``: the index of ``queries[0]`` in its class, for its copy's value)."""
        times = []
        for i, q in enumerate(queries[: self.cli_queries], start=first):
            cmd = provplug_cmd(
                "lineage",
                str(self.path),
                "--value-id",
                str(copy_value(q, i, self.factor)),
                "--method",
                "csprov",
                "--direction",
                direction,
                "--json",
                "-o",
                os.devnull,
                *([] if self.tau is None else ["--tau", str(self.tau)]),
            )
            if self.evict:
                evict_pages(self.path)
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - t0)
        return times


def evict_pages(root: Path) -> int:
    """Drop every file under ``root`` from the OS page cache
    (``posix_fadvise(DONTNEED)``: no privilege needed, clean pages only), so
    that a query reads from the disk what it needs: a cold start, whatever
    earlier queries or the store's size left in memory. Returns the files."""
    count = 0
    for folder, _, names in os.walk(root):
        for name in names:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
            count += 1
    return count


def record(into: dict[str, Any], seconds: float, answer: Any) -> None:
    into["times"].append(seconds)
    into["paths"].append(answer.stats["path"])
    into["scanned"].append(answer.stats["triples_scanned"])
    into["sets"].append(answer.stats["sets_read"])


def local_spark(memory: str) -> Any:
    from provplug.sparksession import local_spark as start

    return start(
        "provplug-paper-eval", "local[2]", **{"spark.sql.shuffle.partitions": "4", "spark.driver.memory": memory}
    )


def bench_factor(
    opts: Options, factor: int, picks: dict[str, Any], args: argparse.Namespace, spark: Any
) -> dict[str, Any]:
    from provplug.store.open import open_store

    path = opts.store(factor)
    store = open_store(path)
    slow = args.slow_queries if factor == 1 else args.big_slow_queries
    slow_methods = tuple(("rq,ccprov,duckdb" if factor == 1 else args.big_methods).split(","))
    con, duck = duckdb_runner(store, opts.data / f"paper-eval-x{factor}.duckdb", args.duckdb_memory)
    bench = Bench(
        factor,
        path,
        spark,
        args.runs,
        slow,
        duck,
        args.tau,
        slow_methods,
        args.big_duckdb_runs if factor > 1 else None,
        args.cli_queries,
    )
    result: dict[str, Any] = {
        "slow": slow,
        "slow_methods": list(slow_methods),
        "tau": args.tau,
        "ram": {},
        "disk": {},
        "cli": {},
    }
    # Every RAM run first: the disk variant drops the cached triple table RQ keeps.
    try:
        for key in ("ram", "disk", "cli"):
            for direction, classes in picks.items():
                result[key][direction] = {}
                for cls, found in classes.items():
                    queries = [Query(**q) for q in found["queries"]]
                    if not queries:
                        continue
                    if key == "cli":
                        result[key][direction][cls] = bench.cli(queries, direction)
                    else:
                        result[key][direction][cls] = getattr(bench, key)(cls, queries, direction)
    finally:
        con.close()
    result["peak_rss"] = {
        "python": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "jvm": jvm_peak_rss(spark),
    }
    result["loadavg"] = os.getloadavg()
    return result


# -- report ----------------------------------------------------------------------------


def gib(n: float | None) -> str:
    return "-" if n is None else f"{n / 2**30:.1f} GiB"


def millions(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n < 1e7 else f"{n / 1e6:.0f}M"


def mean(xs: Sequence[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def secs(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x * 1000:.1f} ms" if x < 1 else f"{x:.2f} s"


def render(results: dict[str, Any], out: Path) -> None:
    factors = sorted(int(f) for f in results["factors"])
    lines = header(results)
    lines += trace_section(results, factors)
    lines += table9_section(results, factors)
    lines += preprocessing_section(results, factors)
    lines += classes_section(results)
    for variant, title, paper in (
        ("ram", "Tables 10-12: RDDs cached in RAM (warm)", PAPER_RAM),
        ("disk", "Table XIII: cached on disk (cold: caches dropped before every query)", PAPER_DISK),
    ):
        lines += query_tables(results, factors, variant, title, paper)
    lines += scans_section(results, factors)
    lines += targets_section(results, factors)
    old = out.read_text() if out.exists() else ""
    notes = old[old.index(NOTES) :] if NOTES in old else ""  # kept across re-renders
    out.write_text("\n".join(lines) + "\n" + notes)


def header(results: dict[str, Any]) -> list[str]:
    lines = [
        "# The paper's evaluation, in its format (000 §4, 002 §V)",
        "",
        "Written by `examples/benchmarks/paper_eval.py` (see its docstring for what each step does). The paper's",
        "trace is confidential, so the paper-shaped synthetic trace of `paper_trace.py` stands in for it: only",
        "the *shape* of Tables 9-13 can be reproduced, and absolute times compare a shared 2-core machine with",
        "the paper's 8-node, 96-core cluster. Each factor's figures come from the command listed with it:",
        "",
    ]
    for f, sec in sorted(results["factors"].items(), key=lambda kv: int(kv[0])):
        lines.append(
            f"- {f}x: `{sec['command']}` ({sec['when']}, provplug {sec['code']}; load average "
            f"{', '.join(f'{x:.1f}' for x in sec['bench']['loadavg'])} at the end)"
        )
    lines += ["", f"Machine: {results['machine']}.", ""]
    return lines


def trace_section(results: dict[str, Any], factors: list[int]) -> list[str]:
    lines = [
        "## The trace and its replicas",
        "",
        "| factor | paper | triples | values | components | large components (paper) | sets | set dependencies | bytes: triples / set dependencies (index) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    base = results["factors"][str(factors[0])]["index"]["counts"] if factors and factors[0] == 1 else None
    for f in factors:
        sec = results["factors"][str(f)]
        c, b = sec["index"]["counts"], sec["index"]["bytes"]
        lines.append(
            f"| {f}x | {PAPER_SIZE.get(f, '-')} | {c['triples']:,} | {c['values']:,} | {c['components']:,} | "
            f"{sec['large_components']} ({PAPER_LARGE.get(f, '-')}) | {c['sets']:,} | {c['set_dependencies']:,} | "
            f"{b['triples'] / 1e6:,.0f} MB / {b['setdeps'] / 1e6:,.1f} MB |"
        )
    lines.append("")
    if base is not None:
        lines.append("Replication (acceptance (a) of the digest): at every factor f the triples, values, components,")
        lines.append(
            "large components, sets and set dependencies are exactly f times the 1x figures: "
            + ", ".join(
                f"{f}x {'yes' if results['factors'][str(f)].get('replicates') else 'NO'}" for f in factors if f > 1
            )
            + (" (checked by the script)." if len(factors) > 1 else " (only 1x measured so far).")
        )
        lines.append("")
    lines += [
        'Set dependencies against triples (paper: 645,303 set dependencies for 6.4M triples, "an order of magnitude',
        'smaller", 0.03 GB against 1.6 GB on disk): '
        + "; ".join(
            f"{f}x {results['factors'][str(f)]['index']['counts']['set_dependencies'] / results['factors'][str(f)]['index']['counts']['triples']:.2f} per triple"
            for f in factors
        )
        + ".",
        "",
    ]
    return lines


def table9_section(results: dict[str, Any], factors: list[int]) -> list[str]:
    first = results["factors"][str(factors[0])]
    rows = [Row(**{**r, "cells": [Cell(**c) for c in r["cells"]]}) for r in first["table9"]]
    splits = ", ".join(f"sp{i}" for i in range(1, len(first["index"]["split_tree"]) + 1))
    lines = [
        f"## Table 9: sets per large component and split ({factors[0]}x)",
        "",
        f"theta = {results['theta']:,} nodes; splits chosen automatically on the 1x store ({splits} at the top level,",
        "the same splits for every factor):",
        "",
        "    " + json.dumps(first["index"]["splits"]),
        "",
        "Each cell: split: number of sets of W(split, component), sets with >= 1,000 nodes, nodes in the largest.",
        "A set still >= theta is re-partitioned on the split's sub-splits: its row follows (named as the paper's",
        "LC2_lc1); \"final sets\" counts the component's sets in the index, which is each row's sets with every",
        "re-partitioned set replaced by its row's (acceptance (b), checked by the script).",
        "",
        "| component | nodes | triples | final sets | sets per split |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.name} | {r.nodes:,} | {r.triples:,} | {r.final_sets:,} | {'; '.join(c.text() for c in r.cells)} |"
        )
    lines.append("")
    for f in factors[1:]:
        same = results["factors"][str(f)].get("table9_same")
        lines.append(
            f"{f}x: the rows of copy 0's large components are {'identical to' if same else 'DIFFERENT from'} the 1x rows "
            '(the paper: "Set statistics are same as given in Table 9").'
        )
    lines += [
        "",
        "The paper's Table 9 for comparison: LC1 sp1 20, 0, 490; sp2 29696, 4, 21734; sp3 219879, 11, 3291 ...",
        "(3 splits by hand, sp3 with sub-splits sp4, sp5; 590,698 sets, 645,303 set dependencies).",
        "",
    ]
    return lines


def preprocessing_section(results: dict[str, Any], factors: list[int]) -> list[str]:
    lines = [
        "## Preprocessing (components and sets)",
        "",
        "| factor | import: copies, total wall, largest peak RSS | index: engine, wall, peak RSS | paper |",
        "|---|---|---|---|",
    ]
    for f in factors:
        st = results["factors"][str(f)]["state"]
        copies = st["copies"]
        wall = sum(c["seconds"] or 0 for c in copies)
        rss = max((c["rss"] or 0 for c in copies), default=0)
        idx = st.get("index", {})
        lines.append(
            f"| {f}x | {len(copies)}, {wall:.0f} s, {gib(rss)} | {idx.get('engine', '-')}, {idx.get('wall', 0):.0f} s, "
            f"{gib(idx.get('rss'))} | {PAPER_PREPROCESS.get(f, '-')} |"
        )
    lines += [
        "",
        "Wall times of child processes (interpreter start-up included); the index time includes reading the",
        "triples and writing the layout, the paper's only WCC and sets. A store reused from an earlier run keeps",
        "the figures measured when it was built.",
        "",
    ]
    return lines


def classes_section(results: dict[str, Any]) -> list[str]:
    lines = [
        "## Query classes (picked on the 1x trace)",
        "",
        "Rules (000 §4): 10 values per class; SC-SL in a component below theta, LC-SL and LC-LL in large components;",
        'ancestors and lineage triples (the paper\'s "transformations", read as triples) both in 100-200 (SL) or',
        "5,000-10,000 (LL). Candidates: values whose path count bounds their lineage from above by at least the",
        "lower limit, largest components first, random order within; each checked by breadth-first search.",
        "",
        "| direction | class | queries (both counts in range + values only) | candidates checked | components | lineage values (min-max) | triples (min-max) | BFS rounds (max) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for direction, classes in results["queries"].items():
        for cls, found in classes.items():
            qs = found["queries"]
            if not qs:
                lines.append(f"| {direction} | {cls} | 0 | {found['checked']:,} of {found['pool']:,} | - | - | - | - |")
                continue
            strict = found.get("strict", len(qs))
            lines.append(
                f"| {direction} | {cls} | {strict} + {len(qs) - strict} | {found['checked']:,} of {found['pool']:,} | {len(found['components'])} | "
                f"{min(q['lineage'] for q in qs):,}-{max(q['lineage'] for q in qs):,} | "
                f"{min(q['triples'] for q in qs):,}-{max(q['triples'] for q in qs):,} | {max(q['rounds'] for q in qs)} |"
            )
    lines += [
        "",
        "Where fewer than 10 values have both counts in range (every candidate checked), the class is topped up",
        'with values whose lineage values alone are in range, i.e. reading the paper\'s "transformations" as',
        "distinct ops (the digest, §1.5: the paper does not define it). Their triples are above the range.",
        "The paper's longest provenance path: 7 (SC-SL, LC-SL), 10 (LC-LL) (002 §V); BFS rounds here are the",
        "rounds RQ needs (the shortest path to the farthest lineage value).",
        "",
    ]
    return lines


def query_tables(
    results: dict[str, Any], factors: list[int], variant: str, title: str, paper: dict[str, Any]
) -> list[str]:
    lines = [f"## {title}", ""]
    if variant == "ram":
        lines += [
            "Mean seconds over a class's queries (the paper's figure); a query's time is the median of its timed",
            "runs after one warm-up. Every answer was checked against the 1x BFS (values and triples).",
            "",
        ]
    else:
        lines += [
            "Mean over the queries of one run each, after dropping provplug's index cache and every cached Spark",
            "DataFrame (RQ re-reads the triple table from Parquet). The OS page cache is not dropped (shared",
            "machine), so files may still come from memory. CSProv in a fresh process: the CLI's wall time,",
            "interpreter start-up included.",
            "",
        ]
    for direction in results["queries"]:
        for cls in CLASSES:
            present = [f for f in factors if cls in results["factors"][str(f)]["bench"][variant].get(direction, {})]
            if not present:
                continue
            head = " | ".join(
                f"{f}x ({millions(results['factors'][str(f)]['index']['counts']['triples'])} triples)" for f in present
            )
            lines += [f"### {cls} ({direction})", "", f"| method | {head} |", "|---" * (len(present) + 1) + "|"]
            methods = (*METHODS, "duckdb") if variant == "ram" else (*METHODS, "csprov_cli", "csprov_cold")
            for m in methods:
                cells = [method_cell(results["factors"][str(f)]["bench"], variant, direction, cls, m) for f in present]
                lines.append(f"| {LABEL[m]} | {' | '.join(cells)} |")
            if direction == "up" and cls in paper:
                for m in METHODS:
                    cells = [
                        f"{paper[cls][m][PAPER_FACTORS.index(f)]:g} s" if f in PAPER_FACTORS else "-" for f in present
                    ]
                    lines.append(
                        f"| paper {LABEL[m]} ({'/'.join(PAPER_SIZE.get(f, '-') for f in present)}) | {' | '.join(cells)} |"
                    )
            lines.append("")
    return lines


def median_of(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def targets_section(results: dict[str, Any], factors: list[int]) -> list[str]:
    """Issue 17's targets, per class: warm CSProv at the top factor against
    1x (within 2x), CSProv against DuckDB's recursive CTE on the same queries
    (faster), and the cold CLI (within 1.5x of 1x)."""
    top = max(factors)
    label = ", ".join(f"{f}x" for f in factors)
    lines = [
        "## Targets (medians over a class's queries)",
        "",
        f"Warm CSProv median at {top}x against 1x (target: within 2x); DuckDB's median over the queries it ran",
        "against CSProv's over the same queries, per factor (target: CSProv faster); cold CLI median at",
        f"{top}x against 1x over the queries every factor ran in a fresh process (target: within 1.5x), with",
        "the page cache as the earlier queries left it, and with the store's pages evicted before each query.",
        "",
        f"| direction | class | CSProv warm ({label}) | {top}x / 1x | DuckDB / CSProv ({label}) | "
        f"cold CLI ({label}) | {top}x / 1x | cold CLI, pages evicted ({label}) | {top}x / 1x |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    benches = {f: results["factors"][str(f)]["bench"] for f in factors}
    for direction in results["queries"]:
        for cls in CLASSES:
            ram = {f: b["ram"].get(direction, {}).get(cls) for f, b in benches.items()}
            if any(r is None for r in ram.values()) or 1 not in ram:
                continue
            warm = {f: median_of(r["csprov"]["times"]) for f, r in ram.items()}
            duck = [
                ratio(median_of(r["duckdb"]["times"]), median_of(r["csprov"]["times"][: len(r["duckdb"]["times"])]))
                for r in ram.values()
            ]
            cells = []
            for key in ("cli", "cli_evicted"):
                cli = _shared_medians({f: b.get(key, {}).get(direction, {}).get(cls, []) for f, b in benches.items()})
                cells += [" / ".join(secs(c) for c in cli.values()), ratio(cli[top], cli[1])]
            lines.append(
                f"| {direction} | {cls} | {' / '.join(secs(w) for w in warm.values())} | "
                f"{ratio(warm[top], warm[1])} | {' / '.join(duck)} | {' | '.join(cells)} |"
            )
    return [*lines, ""]


def _shared_medians(runs: dict[int, list[float]]) -> dict[int, float | None]:
    """Each factor's median over the queries every factor ran (the same queries)."""
    shared = min(len(r) for r in runs.values())
    return {f: median_of(r[:shared]) for f, r in runs.items()}


def tau_text(tau: int | None) -> str:
    return (
        "provplug's default (the driver when the triples fit its memory budget)"
        if tau is None
        else f"tau = {tau:,} triples"
    )


def method_cell(bench: dict[str, Any], variant: str, direction: str, cls: str, method: str) -> str:
    if method in ("csprov_cli", "csprov_cold"):
        times = bench.get("cli" if method == "csprov_cli" else "cli_evicted", {}).get(direction, {}).get(cls, [])
        return f"{secs(mean(times))} ({len(times)})" if times else "-"
    got = bench[variant][direction][cls].get(method)
    if not got or not got["times"]:
        return "-"
    note = f" ({len(got['times'])}" + (f", {'/'.join(sorted(set(got['paths'])))}" if got.get("paths") else "") + ")"
    return secs(mean(got["times"])) + note


def scans_section(results: dict[str, Any], factors: list[int]) -> list[str]:
    lines = [
        "## What each method read (RAM variant, means)",
        "",
        "Cells: sets read / triples scanned (RQ: the whole triple table). In parentheses after a time above: the",
        "number of queries it is the mean of (RQ, CCProv and DuckDB run the first queries of each class only",
        "where the slow-query cap says so) and the execution path (driver below tau, spark above).",
        "",
        "| factor | direction | class | CSProv | CCProv | RQ |",
        "|---|---|---|---|---|---|",
    ]
    for f in factors:
        bench = results["factors"][str(f)]["bench"]
        for direction, classes in bench["ram"].items():
            for cls, got in classes.items():
                cells = []
                for m in ("csprov", "ccprov", "rq"):
                    g = got[m]
                    cells.append(f"{mean(g['sets']) or 0:,.0f} / {mean(g['scanned']) or 0:,.0f}" if g["times"] else "-")
                lines.append(f"| {f}x | {direction} | {cls} | {' | '.join(cells)} |")
    lines.append("")
    caps = ", ".join(f"{f}x: first {results['factors'][str(f)]['bench']['slow']}" for f in factors)
    taus = ", ".join(f"{f}x: {tau_text(results['factors'][str(f)]['bench'].get('tau'))}" for f in factors)
    lines += [
        f"Slow-query cap (RQ, CCProv, DuckDB) per factor: {caps} queries of each class; CSProv ran all.",
        f"Driver or Spark (tau): {taus}.",
        "",
    ]
    return lines


# -- driver ----------------------------------------------------------------------------


def machine() -> str:
    mem = next(
        (ln.split()[1] for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal")), "0"
    )
    import pyspark

    return (
        f"{os.cpu_count()} cores, {int(mem) / 2**20:.0f} GiB RAM (shared with other jobs), Python {platform.python_version()}, "
        f"PySpark {pyspark.__version__}, {platform.system()}; Spark local[2]"
    )


def code_version() -> str:
    """The provplug measured: the commit of the checkout it is imported from
    (``PROVPLUG_CODE`` overrides, e.g. for a ``git archive`` snapshot)."""
    import provplug

    if os.environ.get("PROVPLUG_CODE"):
        return os.environ["PROVPLUG_CODE"]
    where = Path(provplug.__file__).resolve().parent
    git = subprocess.run(["git", "-C", str(where), "describe", "--always", "--dirty"], capture_output=True, text=True)
    return git.stdout.strip() or f"at {where}"


def replicates(base: dict[str, Any], sec: dict[str, Any], f: int) -> bool:
    keys = ("triples", "values", "components", "sets", "set_dependencies")
    ok = all(sec["index"]["counts"][k] == f * base["index"]["counts"][k] for k in keys)
    return ok and sec["large_components"] == f * base["large_components"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--factors",
        default="1,9,24",
        help="replication factors to run (1 is always prepared: queries are picked on it)",
    )
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--theta", type=int, default=25_000)
    p.add_argument("--engine", choices=("local", "spark", "auto"), default="local", help="index engine (default local)")
    p.add_argument(
        "--index-memory",
        metavar="SIZE",
        help="memory budget of the local index engine, e.g. 8G (default: provplug's, 3/4 of the memory available)",
    )
    p.add_argument("--data", type=Path, default=HERE / "data")
    p.add_argument("--queries", type=int, default=10, help="queries per class")
    p.add_argument(
        "--directions", default="up", help="up, or up,down (classes picked by the same rules on descendants)"
    )
    p.add_argument(
        "--slow-queries", type=int, default=10, help="at 1x: how many queries of a class RQ, CCProv and DuckDB run"
    )
    p.add_argument("--big-slow-queries", type=int, default=3, help="the same above 1x")
    p.add_argument(
        "--big-methods",
        default="rq,ccprov,duckdb",
        help="above 1x, which of rq, ccprov, duckdb run on the slow queries (RQ over 100M+ triples "
        "goes to Spark and takes minutes a query)",
    )
    p.add_argument(
        "--big-duckdb-runs",
        type=int,
        default=None,
        help="above 1x, timed DuckDB runs per query after its warm-up (default: --runs)",
    )
    p.add_argument(
        "--cli-queries",
        type=int,
        default=None,
        help="how many of a class's queries run in a fresh process (the CLI; default: all)",
    )
    p.add_argument("--duckdb-threads", type=int, default=None, help="DuckDB's threads (default: its own)")
    p.add_argument(
        "--cli-only",
        action="store_true",
        help="time only the fresh-process CLI again, factors interleaved query by query (other figures kept)",
    )
    p.add_argument(
        "--warm-only", action="store_true", help="time only warm CSProv again on every query (other figures kept)"
    )
    p.add_argument(
        "--evict-pages",
        action="store_true",
        help="with --cli-only: evict the store's files from the OS page cache before each query (a cold "
        "start at every factor; recorded apart from the CLI figures without it)",
    )
    p.add_argument(
        "--duckdb-only",
        action="store_true",
        help="only time DuckDB on the slow queries of factors already benchmarked (other figures kept)",
    )
    p.add_argument(
        "--tau",
        type=int,
        default=None,
        help="triples below which a query recurses on the driver (default: provplug's own choice)",
    )
    p.add_argument("--runs", type=int, default=3, help="timed runs per driver-path query (Spark paths: 1)")
    p.add_argument("--max-checks", type=int, default=200_000, help="candidates checked per class at most")
    p.add_argument("--driver-memory", default="6g")
    p.add_argument("--duckdb-memory", default="3GB")
    p.add_argument("--prepare-only", action="store_true", help="generate, import and index; no queries")
    p.add_argument("--out", type=Path, default=HERE / "paper_eval.md")
    args = p.parse_args(argv)
    factors = sorted({int(f) for f in args.factors.split(",")})
    if not factors or factors[0] < 1:
        p.error("--factors must be positive integers")
    command = "python " + " ".join(
        [str(Path(__file__).resolve().relative_to(HERE.parent.parent)), *(argv if argv is not None else sys.argv[1:])]
    )
    args.data.mkdir(parents=True, exist_ok=True)
    opts = Options(args.data, args.scale, args.seed, args.theta, args.engine, args.index_memory)
    results_path = args.data / "paper-eval-results.json"
    results = load_json(results_path, {"factors": {}})
    if results.get("setup") not in (None, [args.scale, args.seed, args.theta]):
        raise SystemExit(f"{results_path} holds figures of another trace or theta: move it away first")
    results["setup"], results["theta"] = [args.scale, args.seed, args.theta], args.theta
    run(opts, factors, args, command, results, results_path)
    return 0


def run(
    opts: Options,
    factors: list[int],
    args: argparse.Namespace,
    command: str,
    results: dict[str, Any],
    results_path: Path,
) -> None:
    from provplug.store.open import open_store

    prepare(opts, 1, None)
    base_store = open_store(opts.store(1))
    base_index = index_summary(base_store)
    splits_file = opts.data / "paper-eval-splits.json"
    splits_file.write_text(json.dumps(base_index["splits"]))
    for f in factors:
        if f > 1:
            prepare(opts, f, splits_file)
    if args.prepare_only:
        return
    if args.duckdb_only:
        duckdb_only(opts, factors, args, results, results_path)
        return
    if args.cli_only:
        cli_only(opts, factors, args, results, results_path)
        return
    if args.warm_only:
        warm_only(opts, factors, args, results, results_path)
        return
    picks_key = f"2:{args.queries}:{args.directions}:{args.max_checks}"
    if results.get("picks_key") != picks_key:
        results["queries"] = {
            d: pick_queries(base_store, opts.theta, args.queries, args.seed, d, args.max_checks)
            for d in args.directions.split(",")
        }
        results["picks_key"] = picks_key
        results["factors"] = {}  # figures of other queries are not comparable
    base_rows = table9(base_store, opts.theta, base_index["split_tree"])
    check_set_counts(base_rows)
    spark = local_spark(args.driver_memory)
    try:
        for f in factors:
            print(f"== {f}x", flush=True)
            store = open_store(opts.store(f))
            summary = index_summary(store)
            below = paper_trace.COPY_STRIDE if f > 1 else None
            rows = base_rows if f == 1 else table9(store, opts.theta, summary["split_tree"], below)
            check_set_counts(rows)
            sec: dict[str, Any] = {
                "command": command,
                "when": time.strftime("%Y-%m-%d %H:%M"),
                "code": code_version(),
                "index": summary,
                "state": load_json(opts.state_file(f), {}),
                "table9": [asdict(r) for r in rows],
                "table9_same": [asdict(r) for r in rows] == [asdict(r) for r in base_rows],
                "large_components": large_count(store, opts.theta),
            }
            sec["bench"] = bench_factor(opts, f, results["queries"], args, spark)
            merge_saved_factors(results_path, results)
            results["factors"][str(f)] = sec
            results["machine"] = machine()
            base = results["factors"].get("1")
            for g, other in results["factors"].items():
                if base is not None and int(g) > 1:
                    other["replicates"] = replicates(base, other, int(g))
            save_json(results_path, results)
            render(results, args.out)
    finally:
        spark.stop()
    print(args.out.read_text())


def duckdb_only(
    opts: Options, factors: list[int], args: argparse.Namespace, results: dict[str, Any], results_path: Path
) -> None:
    """Time DuckDB on the slow queries of factors already benchmarked (their
    other figures kept), e.g. with settings a large factor needs."""
    from provplug.store.open import open_store

    for f in factors:
        sec = results["factors"][str(f)]
        con, duck = duckdb_runner(
            open_store(opts.store(f)), opts.data / f"paper-eval-x{f}.duckdb", args.duckdb_memory, args.duckdb_threads
        )
        bench = Bench(f, opts.store(f), None, args.runs, sec["bench"]["slow"], duck, duck_runs=args.big_duckdb_runs)
        try:
            for direction, classes in results["queries"].items():
                for cls, found in classes.items():
                    queries = [Query(**q) for q in found["queries"]][: bench.slow]
                    times = []
                    for i, q in enumerate(queries):
                        t, n = timed(
                            functools.partial(duck, copy_value(q, i, f), direction), bench.duck_runs or bench.runs, 1
                        )
                        if n != q.triples:
                            raise AssertionError(
                                f"x{f} {direction} {cls} #{i} DuckDB: {n} triples, expected {q.triples}"
                            )
                        print(f"  x{f} {direction} {cls} #{i} duckdb: {t * 1000:.1f} ms", flush=True)
                        times.append(t)
                    if queries:
                        sec["bench"]["ram"][direction][cls]["duckdb"]["times"] = times
        finally:
            con.close()
        sec["bench"]["duckdb_settings"] = {
            "memory": args.duckdb_memory,
            "threads": args.duckdb_threads,
            "command": " ".join(sys.argv),
            "loadavg": os.getloadavg(),
        }
        save_factor(results_path, results, f, sec, args.out)


def save_factor(results_path: Path, results: dict[str, Any], factor: int, sec: dict[str, Any], out: Path) -> None:
    """Keep ``factor``'s figures beside the other factors' as saved now, and render."""
    merge_saved_factors(results_path, results)
    results["factors"][str(factor)] = sec
    save_json(results_path, results)
    render(results, out)


def rerun_settings() -> dict[str, Any]:
    """What a re-timing run records beside its figures."""
    return {
        "command": " ".join(["python", *sys.argv]),
        "when": time.strftime("%Y-%m-%d %H:%M"),
        "code": code_version(),
        "loadavg": os.getloadavg(),
    }


def no_duckdb(value: int, direction: str) -> int:
    raise AssertionError("DuckDB does not run when only CSProv is re-timed")


def warm_only(
    opts: Options, factors: list[int], args: argparse.Namespace, results: dict[str, Any], results_path: Path
) -> None:
    """Time warm CSProv again on every query of factors already benchmarked
    (their other figures kept; every answer checked against the 1x BFS)."""
    for f in factors:
        sec = results["factors"][str(f)]
        bench = Bench(f, opts.store(f), None, args.runs, 0, no_duckdb, args.tau)
        for direction, classes in results["queries"].items():
            for cls, found in classes.items():
                queries = [Query(**q) for q in found["queries"]]
                if queries:
                    sec["bench"]["ram"][direction][cls]["csprov"] = bench.ram(cls, queries, direction)["csprov"]
        sec["bench"]["warm_settings"] = rerun_settings()
        save_factor(results_path, results, f, sec, args.out)


def cli_only(
    opts: Options, factors: list[int], args: argparse.Namespace, results: dict[str, Any], results_path: Path
) -> None:
    """Time the fresh-process CLI again for factors already benchmarked (their
    other figures kept), the factors interleaved query by query so that the
    ratios between them are measured side by side."""
    benches = {
        f: Bench(f, opts.store(f), None, args.runs, 0, no_duckdb, args.tau, cli_queries=1, evict=args.evict_pages)
        for f in factors
    }
    key = "cli_evicted" if args.evict_pages else "cli"
    fresh: dict[int, dict[str, dict[str, list[float]]]] = {f: {} for f in factors}
    for direction, classes in results["queries"].items():
        for cls, found in classes.items():
            queries = [Query(**q) for q in found["queries"]][: args.cli_queries]
            for i, q in enumerate(queries):
                for f, bench in benches.items():
                    (t,) = bench.cli([q], direction, first=i)
                    fresh[f].setdefault(direction, {}).setdefault(cls, []).append(t)
                    print(f"  x{f} {direction} {cls} #{i} {key}: {t * 1000:.1f} ms", flush=True)
    merge_saved_factors(results_path, results)
    for f in factors:
        sec = results["factors"][str(f)]
        sec["bench"][key] = fresh[f]
        sec["bench"][f"{key}_settings"] = rerun_settings()
    save_json(results_path, results)
    render(results, args.out)


def merge_saved_factors(path: Path, results: dict[str, Any]) -> None:
    """Take the other factors' figures from the file as it is now: another
    run of this script (other factors, the same queries) may have saved
    figures since this one started."""
    saved = load_json(path, {})
    if saved.get("picks_key") == results.get("picks_key"):
        results["factors"] = {**results["factors"], **saved.get("factors", {})}


def large_count(store: Any, theta: int) -> int:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from provplug.index import current_dir

    comps = pq.read_table(f"{current_dir(store)}/components.parquet", columns=["nodes"])
    return int(pc.sum(pc.greater_equal(comps["nodes"], theta)).as_py() or 0)


if __name__ == "__main__":
    sys.exit(main())
