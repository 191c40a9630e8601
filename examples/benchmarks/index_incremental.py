"""Incremental index against a full rebuild, on the paper-shaped trace.

    nice python examples/benchmarks/index_incremental.py [--scale 1] [--runs 3] [--from STORE]

The base store holds the paper-shaped trace (``paper_trace.py``, scale 1:
about 7M triples), indexed in full once. A new run of 1% of its triples is
then committed whose cells partly derive from cells of the trace (a third of
its parents in the three largest components, a third elsewhere in the
trace, a third its own earlier cells). Each repetition takes two copies of
the indexed base with the new run committed and, in alternating order,
indexes one incrementally (``build_index``, the default) and the other in
full (``full=True``): wall time of each, side by side in the same process,
on the same machine state. It checks that the two answer alike (every
method, both directions, on values of the largest components, of the
trace's other components and of the new run) and that the store stays
queryable: a query about the trace right after the commit (before
re-indexing; it answers and says newer runs are not indexed yet), queries
in a loop from a second process while an incremental build runs (one more
build, untimed, so that the querier does not share the timed builds'
cores), and after.
Then ``delete-run`` of the new run (it drops the run's layer: the index
stays current) is timed, and in the fully built copy (where the run is in
the base layer, so the deletion trims the base) against a full rebuild after
it, answers compared. ``--from STORE`` copies the trace's runs from an
existing store instead of generating it. Before each timed build the
copies' pages are evicted from the page cache (``posix_fadvise(DONTNEED)``
on their files, no other file), so both builds start from disk whatever the
copying before left cached (``--warm`` keeps them). ``--skip ccprov@largest``
leaves out of the answer comparison a method on the largest components'
values (at 9x CCProv recurses over a 20M-triple component on Spark).
``--driver-memory`` sizes the Spark driver of the queries that recurse on
Spark. Writes ``index_incremental.md``.
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
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import paper_trace  # noqa: E402  (the generator beside this file)

import provplug  # noqa: E402
from provplug.errors import NotIndexedError  # noqa: E402
from provplug.index import build_index, read_meta  # noqa: E402
from provplug.ingest.importer import import_provenance  # noqa: E402
from provplug.query.index_reader import IndexReader  # noqa: E402
from provplug.store.open import open_store  # noqa: E402

NEW_SHARE = 0.01  # the new run's triples, of the trace's
METHODS = ("ccprov", "csprov", "auto")


def base_store(folder: Path, scale: float, seed: int, source: Path | None) -> Path:
    """The trace, indexed in full (made once, reused by later invocations)."""
    path = folder / f"incr-trace-{scale:g}-{seed}.prov"
    if (path / "index" / "CURRENT").exists():
        return path
    shutil.rmtree(path, ignore_errors=True)
    if source is not None:
        path.mkdir(parents=True)
        for name in ("runs", "_ids", "provplug-store.json"):
            (shutil.copytree if (source / name).is_dir() else shutil.copy2)(source / name, path / name)
        (path / "_staging").mkdir()  # the store's own (empty when no writer runs)
    else:
        paper_trace.generate(path, scale=scale, seed=seed)
    build_index(path, engine="local", full=True)
    return path


def new_run_files(base: Path, folder: Path, seed: int) -> tuple[Path, Path, dict[str, list[int]]]:
    """Triples and values files of the new run, and sample values to query."""
    rng = np.random.default_rng(seed + 1)
    gen = base / "index" / (base / "index" / "CURRENT").read_text().strip()
    components = pq.read_table(gen / "components.parquet").to_pandas().sort_values("nodes", ascending=False)
    largest = components["ccid"].to_numpy()[:3]
    values = pq.read_table(gen / "value_sets", columns=["value_id", "ccid"]).to_pandas()
    in_large = values["value_id"].to_numpy()[np.isin(values["ccid"].to_numpy(), largest)]
    elsewhere = values["value_id"].to_numpy()[~np.isin(values["ccid"].to_numpy(), largest)]
    triples = int((read_meta(open_store(base)) or {})["counts"]["triples"])
    m = int(triples * NEW_SHARE)
    n = m // 2  # new values: two parents each
    first = int(values["value_id"].max()) + 1
    new_ids = np.arange(first, first + n, dtype=np.int64)
    dst = np.repeat(new_ids, 2)
    kind = rng.integers(0, 3, size=len(dst))
    src = np.where(kind == 0, rng.choice(in_large, len(dst)), rng.choice(elsewhere, len(dst)))
    own = (kind == 2) & (np.arange(len(dst)) >= 2)
    src[own] = dst[own] - rng.integers(1, np.minimum(dst[own] - first, 500) + 1)  # an earlier cell of the run
    src[own & (src < first)] = rng.choice(elsewhere, int((own & (src < first)).sum()))
    keep = src != dst
    names = pa.array(["KBFACT", "REPORT"])
    tp, vp = folder / "new-triples.parquet", folder / "new-values.parquet"
    ops = pa.DictionaryArray.from_arrays(pa.array(np.zeros(int(keep.sum()), np.int32)), pa.array(["KBFACT_9"]))
    pq.write_table(pa.table({"src": src[keep], "dst": dst[keep], "op": ops}), tp)
    tables = pa.DictionaryArray.from_arrays(pa.array((new_ids % 2).astype(np.int32)), names)
    pq.write_table(pa.table({"value_id": new_ids, "table": tables}), vp)
    sample = {
        "largest components": rng.choice(in_large, 1, replace=False).tolist(),
        "other components": rng.choice(elsewhere, 2, replace=False).tolist(),
        "new run": rng.choice(new_ids, 2, replace=False).tolist(),
    }
    return tp, vp, sample


def answers(
    store: Path, sample: dict[str, list[int]], skip: frozenset[str] = frozenset()
) -> dict[tuple[int, str, str], tuple[int, int]]:
    """Ancestor and edge counts of every method, both directions, on the
    ``sample``'s values but ``method@kind`` pairs in ``skip``."""
    opened = provplug.open(store)
    out = {}
    for kind, v in ((k, v) for k, vs in sample.items() for v in vs):
        for method in METHODS:
            if f"{method}@{kind.split()[0]}" in skip:
                continue
            for direction in ("up", "down"):
                a = opened.lineage(value_id=int(v), method=method, direction=direction)
                out[int(v), method, direction] = (len(a.value_ids), len(a.edges))
    return out


# A second process querying a trace value in a loop until its stop file
# appears; prints how many queries answered and the failures.
QUERIER = """
import json, os, sys
import provplug
store, value, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3]
answered, failures = 0, []
while not os.path.exists(stop):
    try:
        provplug.open(store).lineage(value_id=value, method="csprov")
        answered += 1
    except provplug.ProvplugError as exc:
        failures.append(f"{type(exc).__name__}: {exc}")
print(json.dumps({"answered": answered, "failures": failures}))
"""


def during_build(base: Path, work: Path, files: tuple[Path, Path], value: int) -> dict[str, Any]:
    """Queries from a second process while an incremental build runs (untimed)."""
    store, stop = work / "during.prov", work / "stop"
    shutil.copytree(base, store)
    import_provenance(open_store(store), *files)
    querier = subprocess.Popen(
        [sys.executable, "-c", QUERIER, str(store), str(value), str(stop)], stdout=subprocess.PIPE, text=True
    )
    time.sleep(3)  # the querier has started and answered before the build begins
    build_index(store, engine="local")
    stop.touch()
    out, _ = querier.communicate(timeout=600)
    shutil.rmtree(store)
    return dict(json.loads(out))


def evict(store: Path) -> None:
    """Drop the pages of ``store``'s files from the page cache (written back
    first), so that a build reads them from disk, as after a reboot."""
    for folder, _, names in os.walk(store):
        for name in names:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            try:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def repetition(
    base: Path, work: Path, files: tuple[Path, Path], sample: dict[str, list[int]], i: int, args: argparse.Namespace
) -> dict[str, Any]:
    inc, full = work / f"inc-{i}.prov", work / f"full-{i}.prov"
    for path in (inc, full):
        shutil.copytree(base, path)
    run = str(import_provenance(open_store(inc), *files)["run_id"])
    full_run = str(import_provenance(open_store(full), *files)["run_id"])
    trace_value = sample["largest components"][0]
    # Right after the commit, before re-indexing: the trace answers, the new run is refused.
    before = provplug.open(inc).lineage(value_id=trace_value, method="csprov")
    note = IndexReader.current(open_store(inc)).freshness().get("index", {}).get("note", "")
    try:
        provplug.open(inc).lineage(value_id=sample["new run"][0], method="csprov")
        refused = "answered (wrong)"
    except NotIndexedError as exc:
        refused = str(exc)
    timings: dict[str, float] = {}

    def incremental() -> None:
        if not args.warm:
            evict(inc)
        t = time.perf_counter()
        meta = build_index(inc, engine="local")
        timings["incremental"] = time.perf_counter() - t
        assert "incremental" in meta, "the build was not incremental"

    def rebuild() -> None:
        if not args.warm:
            evict(full)
        t = time.perf_counter()
        build_index(full, engine="local", full=True)
        timings["full"] = time.perf_counter() - t

    for step in (incremental, rebuild) if i % 2 == 0 else (rebuild, incremental):
        step()
    skip = frozenset(args.skip)
    got, want = answers(inc, sample, skip), answers(full, sample, skip)
    t = time.perf_counter()
    deleted = provplug.open(inc).delete_run(run)
    timings["delete-run"] = time.perf_counter() - t
    after_delete = provplug.open(inc).lineage(value_id=trace_value, method="csprov")
    result = {
        "timings": timings,
        "equal": got == want,
        "differences": [k for k in got if got[k] != want.get(k)],
        "answers": len(got),
        "before_reindex": {"ancestors": len(before.value_ids), "note": note, "new_run_query": refused},
        "delete_stale": deleted["index_stale"],
        "after_delete_ancestors": len(after_delete.value_ids),
    }
    if args.base_delete:
        result.update(delete_from_base(full, full_run, sample, timings, skip))
    for path in (inc, full):
        shutil.rmtree(path)
    return result


def delete_from_base(
    full: Path, run: str, sample: dict[str, list[int]], timings: dict[str, float], skip: frozenset[str]
) -> dict[str, Any]:
    """In the fully built copy the new run is in the base layer: deleting it
    trims the base (timed), then a full rebuild (timed); answers compared."""
    trace = {key: vs for key, vs in sample.items() if key != "new run"}
    t = time.perf_counter()
    base_deleted = provplug.open(full).delete_run(run)
    timings["delete-run, base"] = time.perf_counter() - t
    trimmed = answers(full, trace, skip)
    t = time.perf_counter()
    build_index(full, engine="local", full=True)
    timings["rebuild after delete"] = time.perf_counter() - t
    rebuilt = answers(full, trace, skip)
    return {"base_delete_stale": base_deleted["index_stale"], "base_delete_equal": trimmed == rebuilt}


def report(
    rows: list[dict[str, Any]], during: dict[str, Any], base_triples: int, new_triples: int, args: argparse.Namespace
) -> str:
    full = [r["timings"]["full"] for r in rows]
    inc = [r["timings"]["incremental"] for r in rows]
    dele = [r["timings"]["delete-run"] for r in rows]
    base = "delete-run, base" in rows[0]["timings"]
    lines = [
        "# Incremental index against a full rebuild",
        "",
        f"Written by `{' '.join(['python', *sys.argv])}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"({platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; the machine was shared"
        f" with other jobs, load average {os.getloadavg()[0]:.1f} at the end: absolute times are noisy, the"
        " ratio is measured side by side in one process).",
        "",
        f"Trace: paper_trace scale {args.scale:g} (seed {args.seed}), {base_triples:,} triples, indexed in full."
        f" New run: {new_triples:,} triples ({new_triples / base_triples:.2%}), every new cell with two parents:"
        " a third in the trace's three largest components, a third elsewhere in the trace, a third the run's"
        " own earlier cells.",
        "",
        "| repetition | full build (s) | incremental (s) | incremental / full | delete-run, layer dropped (s) |"
        + (" delete-run, base layer trimmed (s) | full rebuild after it (s) | trimmed / rebuild |" if base else ""),
        "|---|---|---|---|---|" + ("---|---|---|" if base else ""),
    ]
    for i, r in enumerate(rows, 1):
        t = r["timings"]
        lines.append(
            f"| {i} ({'incremental first' if i % 2 == 1 else 'full first'}) | {t['full']:.2f} |"
            f" {t['incremental']:.2f} | {t['incremental'] / t['full']:.1%} | {t['delete-run']:.2f} |"
            + (_base_cells(t["delete-run, base"], t["rebuild after delete"]) if base else "")
        )
    lines.append(
        f"| **median** | **{statistics.median(full):.2f}** | **{statistics.median(inc):.2f}** |"
        f" **{statistics.median(inc) / statistics.median(full):.1%}** | {statistics.median(dele):.2f} |"
        + (_base_cells(*(statistics.median(r["timings"][k] for r in rows) for k in BASE_TIMINGS)) if base else "")
    )
    r0 = rows[0]
    lines += [
        "",
        "Answers: "
        + (
            "every repetition's incremental index answered exactly as its full rebuild"
            if all(r["equal"] for r in rows)
            else "DIFFERENCES: " + str([r["differences"] for r in rows])
        )
        + f" ({r0['answers']} queries each: 5 values (a largest component, other components, the new run) x"
        f" {', '.join(METHODS)} x up, down"
        + (f", less {', '.join(args.skip)} (method@values left out)" if args.skip else "")
        + "; ancestor and edge counts compared).",
        "",
        f"Page cache: {'as the copies left it' if args.warm else 'each copy evicted before its timed build'}."
        + (f" Spark driver memory for the queries: {args.driver_memory}." if args.driver_memory else ""),
        "",
        "Queryable throughout:",
        f"- after the commit, before re-indexing: a query about a trace value answered"
        f' ({r0["before_reindex"]["ancestors"]:,} ancestors) with the note "{r0["before_reindex"]["note"]}";'
        f' a query about the new run\'s value was refused: "{r0["before_reindex"]["new_run_query"]}";',
        f"- during an incremental build (one more, untimed, of the same run), a second process querying a trace"
        f" value in a loop: {during['answered']} queries answered, {len(during['failures'])} failed"
        + (f" ({during['failures'][:3]})" if during["failures"] else "")
        + ";",
        f"- after `delete-run` of the new run: index stale = {[r['delete_stale'] for r in rows]},"
        f" the trace query answered ({r0['after_delete_ancestors']:,} ancestors).",
    ]
    if base:
        lines.append(
            "- `delete-run` of the new run from the fully built copy (the run in the base layer, trimmed from it):"
            f" index stale = {[r['base_delete_stale'] for r in rows]}; the trace values' answers (every method,"
            f" both directions) equal a full rebuild's afterwards: {[r['base_delete_equal'] for r in rows]}."
        )
    return "\n".join(lines) + "\n"


BASE_TIMINGS = ("delete-run, base", "rebuild after delete")


def _base_cells(trimmed: float, rebuild: float) -> str:
    return f" {trimmed:.2f} | {rebuild:.2f} | {trimmed / rebuild:.1%} |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--from", dest="source", type=Path, help="copy the trace's runs from this store")
    parser.add_argument("--data", type=Path, default=HERE / "data")
    parser.add_argument(
        "--no-base-delete",
        dest="base_delete",
        action="store_false",
        help="skip timing delete-run of a base-layer run (it costs one more full build)",
    )
    parser.add_argument("--out", type=Path, default=HERE / "index_incremental.md")
    parser.add_argument("--warm", action="store_true", help="do not evict the copies' pages before the builds")
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=[f"{m}@{k}" for m in METHODS for k in ("largest", "other", "new")],
        help="leave a method on a kind of value out of the answer comparison (repeatable)",
    )
    parser.add_argument("--driver-memory", help="spark.driver.memory of the queries that recurse on Spark, e.g. 4g")
    args = parser.parse_args(argv)
    if args.driver_memory:  # the session the queries' Spark path then uses (started only if one needs it)
        from provplug.sparksession import local_spark

        local_spark("index-incremental-bench", "local[2]", **{"spark.driver.memory": args.driver_memory})
    args.data.mkdir(parents=True, exist_ok=True)
    base = base_store(args.data, args.scale, args.seed, args.source)
    base_triples = int((read_meta(open_store(base)) or {})["counts"]["triples"])
    with tempfile.TemporaryDirectory(prefix="incr-", dir=args.data) as tmp:
        work = Path(tmp)
        *files, sample = new_run_files(base, work, args.seed)
        new_triples = pq.read_metadata(files[0]).num_rows
        rows = []
        for i in range(args.runs):
            rows.append(repetition(base, work, (files[0], files[1]), sample, i, args))
            t = rows[-1]["timings"]
            print(
                f"repetition {i + 1}: full {t['full']:.2f}s, incremental {t['incremental']:.2f}s,"
                f" delete-run {t['delete-run']:.2f}s, equal {rows[-1]['equal']}",
                flush=True,
            )
        during = during_build(base, work, (files[0], files[1]), sample["largest components"][0])
    text = report(rows, during, base_triples, new_triples, args)
    args.out.write_text(text)
    print(text)
    exact = all(r["equal"] and r.get("base_delete_equal", True) and not r.get("base_delete_stale") for r in rows)
    return 0 if exact and not during["failures"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
