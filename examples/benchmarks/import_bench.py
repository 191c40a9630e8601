"""Import of a large, deep provenance graph: time, peak memory, progress.

    python examples/benchmarks/import_bench.py [--width 500] [--depth 20000] [--duplicates 1000]

Generates (once, under ``examples/benchmarks/data/``) a triples file and a
values file: ``width`` chains of ``depth`` values, each value derived from the
value before it in its own chain and in the next chain (2 x width x (depth - 1)
triples: 19,999,000 with the defaults, plus ``duplicates`` repeated rows, 20M
rows in all), ids a random permutation spread over the imported id range,
four tables (every chain stays in one table, so the table graph has edges
inside tables and the cycle check must order the values) and eight ops. Then:

1. times ``python -m provplug import`` on it in a child process (wall time,
   peak RSS of the child) and checks that its progress lines cover every
   phase, and how long the longest silence between two lines was;
2. times a one-triple import into the same store that shares a value with the
   big run (the cycle check then orders the earlier run's values too);
   both ``--runs`` times, into a new store each time;
3. times the old cycle check (``_is_acyclic`` as of 920dacc, one pass over all
   edges per level) against the new one on 1M-edge ladders of 2,000 and
   20,000 levels, side by side in this process;

and writes ``examples/benchmarks/import.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from provplug.ingest.importer import _dense_numbers, topological_order

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
REPO = HERE.parent.parent
SEED = 18

PHASES = (
    "reading values",
    "sorting values",
    "read values",
    "reading triples",
    "read triples",
    "numbering values",
    "numbered values",
    "deduplicating triples",
    "deduplicated triples",
    "cycle check: table graph",
    "cycle check: ordering values",
    "cycle check: ordered values",
    "cycle check: read earlier imported triples",
    "writing triples",
    "wrote triples",
    "writing values",
    "wrote values",
    "committing",
    "import committed",
)


# -- the graph -------------------------------------------------------------------


def ladder(width: int, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Edges over values 0..width*depth-1 (value = level * width + chain)."""
    level, chain = np.divmod(np.arange(width, width * depth, dtype=np.int64), width)
    src = np.concatenate([(level - 1) * width + chain, (level - 1) * width + (chain + 1) % width])
    dst = np.concatenate([level * width + chain, level * width + chain])
    return src, dst


def write_input(width: int, depth: int, duplicates: int) -> tuple[Path, Path, int]:
    """The triples and values files (reused when already generated)."""
    name = f"import-{width}x{depth}+{duplicates}"
    triples, values = DATA / f"{name}-triples.parquet", DATA / f"{name}-values.parquet"
    if triples.exists() and values.exists():
        return triples, values, pq.ParquetFile(triples).metadata.num_rows
    DATA.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    n_values = width * depth
    ids = rng.permutation(n_values).astype(np.int64) * 4099 + 17  # sparse, below 2**46
    src, dst = ladder(width, depth)
    again = rng.integers(0, len(src), duplicates)
    src, dst = np.concatenate([src, src[again]]), np.concatenate([dst, dst[again]])
    level = dst // width
    ops = pa.DictionaryArray.from_arrays(pa.array((level % 8).astype(np.int32)), [f"step{k}" for k in range(8)])
    pq.write_table(pa.table({"src": ids[src], "dst": ids[dst], "op": ops}), triples, row_group_size=1 << 20)
    value = np.arange(n_values)
    tables = pa.DictionaryArray.from_arrays(pa.array((value % width % 4).astype(np.int32)), ["A", "B", "C", "D"])
    columns = pa.DictionaryArray.from_arrays(pa.array((value // width % 2).astype(np.int32)), ["x", "y"])
    pq.write_table(pa.table({"value_id": ids, "table": tables, "column": columns}), values, row_group_size=1 << 20)
    return triples, values, len(src)


# -- timing the command ------------------------------------------------------------


@dataclass
class ImportRun:
    command: str
    wall: float
    peak_rss_gib: float
    lines: list[str]
    longest_silence: float
    output: str

    def missing(self, phases: Sequence[str]) -> list[str]:
        return [p for p in phases if not any(line.startswith(f"[provplug] {p}:") for line in self.lines)]


def timed_import(store: Path, triples: Path, values: Path | None) -> ImportRun:
    """Run ``provplug import`` in a child: wall time, the child's own peak RSS
    (``wait4``), its progress lines as they come, the longest gap between them."""
    cmd = [sys.executable, "-m", "provplug", "import", str(store), "--triples", str(triples)]
    cmd += ["--values", str(values)] if values else []
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    lines, stamps = [], []
    for line in proc.stderr:
        lines.append(line.rstrip("\n"))
        stamps.append(time.monotonic() - t0)
        print(line, end="", file=sys.stderr, flush=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    if proc.returncode:
        raise SystemExit(f"import failed ({proc.returncode}): {lines[-1:]}")
    return ImportRun(
        command=" ".join(["python", *cmd[1:]]).replace(str(REPO) + "/", ""),
        wall=wall,
        peak_rss_gib=usage.ru_maxrss / 2**20,  # KiB on Linux
        lines=lines,
        longest_silence=float(np.diff([0.0, *stamps, wall]).max()),
        output=out.strip().replace(str(REPO) + "/", ""),
    )


# -- old against new cycle check, side by side ---------------------------------------


def old_is_acyclic(edges: np.ndarray) -> bool:
    """provplug/ingest/importer.py ``_is_acyclic`` as of commit 920dacc, verbatim."""
    if len(edges) == 0:
        return True
    nodes, inverse = np.unique(edges, return_inverse=True)
    src, dst = inverse.reshape(edges.shape).T
    alive = np.ones(len(src), dtype=bool)
    while alive.any():
        indeg = np.bincount(dst[alive], minlength=len(nodes))
        ready = indeg == 0
        removable = alive & ready[src]
        if not removable.any():
            return False
        alive &= ~removable
    return True


def new_is_acyclic(edges: np.ndarray) -> bool:
    nodes, dense = _dense_numbers(edges.T.ravel())
    return topological_order(dense[: len(edges)], dense[len(edges) :], len(nodes)).acyclic


@dataclass
class Comparison:
    width: int
    depth: int
    edges: int
    old_cpu: float
    new_cpu: float

    def row(self) -> str:
        return (
            f"| {self.edges:,} | {self.width} x {self.depth:,} | {self.old_cpu:.1f} s | {self.new_cpu:.1f} s "
            f"| {self.old_cpu / max(self.new_cpu, 0.01):.0f}x |"
        )


def side_by_side(shape: str) -> Comparison:
    """CPU time of the old and the new check on one ladder ``WIDTHxDEPTH``."""
    width, depth = (int(k) for k in shape.split("x"))
    rng = np.random.default_rng(SEED)
    src, dst = ladder(width, depth)
    ids = rng.permutation(width * depth).astype(np.int64) * 4099 + 17
    edges = np.stack([ids[src], ids[dst]], axis=1)
    cpu = {}
    for name, check in (("new", new_is_acyclic), ("old", old_is_acyclic)):
        start = time.process_time()
        assert check(edges)
        cpu[name] = time.process_time() - start
        print(f"{name} cycle check on {len(edges):,} edges, {width} x {depth:,}: {cpu[name]:.1f}s CPU", flush=True)
    return Comparison(width, depth, len(edges), cpu["old"], cpu["new"])


# -- the report --------------------------------------------------------------------


def report(
    args: argparse.Namespace,
    rows: int,
    runs: list[tuple[ImportRun, ImportRun]],
    compare: list[Comparison],
    load: tuple[float, float],
) -> str:
    unique = 2 * args.width * (args.depth - 1)
    bigs, smalls = [r[0] for r in runs], [r[1] for r in runs]
    big = sorted(bigs, key=lambda r: r.wall)[len(bigs) // 2]  # the median run, quoted in full
    return f"""# Import benchmark (deep graph, {rows:,} triples)

Reproduce: `python examples/benchmarks/import_bench.py --width {args.width} --depth {args.depth} --duplicates {args.duplicates} --runs {args.runs} --compare {" ".join(args.compare)}`
(from the repository root, venv active).

Machine: 2 cores shared with other work (load average {load[0]:.1f} at the start, {load[1]:.1f} at the end),
Python {platform.python_version()}, NumPy {np.__version__}, pyarrow {pa.__version__}, {platform.system()}.

## Input

{args.width} chains of {args.depth:,} values; each value is derived from the value before it in its own chain
and in the next chain: {unique:,} distinct triples plus {args.duplicates:,} repeated rows = {rows:,} rows,
{args.width * args.depth:,} values (longest path: {args.depth - 1:,} triples), ids a random permutation spread over the
imported id range, 4 tables (A-D, each chain in one table: the cycle check must order the values), 2
columns, 8 ops. Parquet, written by this script under `examples/benchmarks/data/`.

## Figures

| what | wall time (median of {len(runs)}) | peak RSS (largest) |
|---|---|---|
| `{big.command}` | **{big.wall:.1f} s** ({_seconds(bigs)}) | **{max(r.peak_rss_gib for r in bigs):.2f} GiB** |
| a 1-triple import sharing a value with that run (orders both runs' values) | {_median_wall(smalls):.1f} s ({_seconds(smalls)}) | {max(r.peak_rss_gib for r in smalls):.2f} GiB |

Imported: {big.output}. Longest time without a progress line: {max(r.longest_silence for r in bigs):.1f} s
(largest of the runs).

Cycle check alone, old against new, side by side in one process (CPU time, both starting from the
sparse ids) on ladders of the same shape, `width x depth` values:

| edges | shape | old: one pass over all edges per level (`_is_acyclic` at 920dacc) | new: one sort, then Kahn over the frontier's edges | speed-up |
|---|---|---|---|---|
{chr(10).join(c.row() for c in compare)}

The old check's time grows with the depth (edges x levels); the new one's does not (below 64 values
in a frontier it walks values one by one in Python rather than paying a NumPy round per level).

## Progress lines of the {rows:,}-row import (stderr, the median run)

{_quoted(big.lines)}

## Progress lines of the 1-triple import (its run)

{_quoted(runs[bigs.index(big)][1].lines)}
"""


def _seconds(runs: list[ImportRun]) -> str:
    return ", ".join(f"{r.wall:.1f}" for r in runs)


def _median_wall(runs: list[ImportRun]) -> float:
    return sorted(r.wall for r in runs)[len(runs) // 2]


def _quoted(lines: list[str]) -> str:
    return "\n".join(["```", *lines, "```"])


def import_twice(triples: Path, values: Path) -> tuple[ImportRun, ImportRun]:
    """The big import into a new store, then a 1-triple import sharing a value with it."""
    store = DATA / "import-bench.prov"
    shutil.rmtree(store, ignore_errors=True)
    big = timed_import(store, triples, values)
    missing = big.missing(PHASES)
    if missing:
        raise SystemExit(f"progress lines miss phases: {missing}")
    shared = pq.read_table(triples, columns=["src"]).column("src")[0].as_py()
    one = DATA / "import-bench-one.csv"
    one.write_text(f"src,dst,op\n{shared},{2**45},extra\n")
    small = timed_import(store, one, None)
    if small.missing(["cycle check: ordered values with earlier runs"]):
        raise SystemExit(f"the small import did not order the earlier run's values: {small.lines}")
    shutil.rmtree(store, ignore_errors=True)
    return big, small


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=500)
    parser.add_argument("--depth", type=int, default=20_000)
    parser.add_argument("--duplicates", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=3, help="imports timed (the median is quoted)")
    parser.add_argument(
        "--compare",
        nargs="*",
        default=["250x2000", "25x20000"],
        metavar="WIDTHxDEPTH",
        help="ladders on which the old and the new cycle check are timed side by side",
    )
    parser.add_argument("--out", type=Path, default=HERE / "import.md")
    args = parser.parse_args(argv)
    load_start = os.getloadavg()[0]
    triples, values, rows = write_input(args.width, args.depth, args.duplicates)
    print(f"input: {rows:,} rows in {triples}", flush=True)
    runs = [import_twice(triples, values) for _ in range(args.runs)]
    compare = [side_by_side(shape) for shape in args.compare]
    args.out.write_text(report(args, rows, runs, compare, (load_start, os.getloadavg()[0])))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
