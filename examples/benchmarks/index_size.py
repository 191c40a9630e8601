"""Where an index generation's bytes go, per file kind, and how long the build takes.

    python examples/benchmarks/index_size.py STORE --builds 3 --label after --out sizes-after.json
    python examples/benchmarks/index_size.py STORE --builds 3 --label before --source DIR --out sizes-before.json

``STORE`` is a paper-shaped trace (``paper_trace.py STORE``). Each build runs
in a fresh child process (``--source DIR``: with the ``provplug`` package of
DIR, e.g. a ``git archive`` of an earlier commit), its wall time is taken,
and the last generation's files are summed per kind (Parquet buckets, mapped
copies, fences, ...) in bytes and bytes per triple. The answers to a fixed
set of lineage queries (values spread over the store, both directions) are
recorded as digests so two trees' answers can be compared
(``--compare A.json B.json``). Older generations are removed between builds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent

BUILD = """
import json, sys, time
from provplug.index import build_index
t0 = time.monotonic()
meta = build_index(sys.argv[1], engine="local")
print(json.dumps({"seconds": time.monotonic() - t0, "generation": meta["generation"], "counts": meta["counts"]}))
"""

# Lineage answers of a few values, as digests of their sorted edges.
ANSWERS = """
import hashlib, json, sys
import numpy as np
import pyarrow.parquet as pq
import provplug
from provplug.store.open import open_store
store = provplug.open(sys.argv[1])
values = np.unique(pq.read_table(open_store(sys.argv[1]).triple_files()[0], columns=["dst"]).column("dst").to_numpy())
picked = values[np.linspace(0, len(values) - 1, 12).astype(int)]
out = {}
for v in picked.tolist():
    for direction in ("up", "down"):
        for method in ("csprov", "ccprov"):
            answer = store.lineage(value_id=v, direction=direction, method=method).to_dict()
            edges = sorted((e["src"], e["dst"], e["op"]) for e in answer["edges"])
            out[f"{v} {direction} {method}"] = [len(edges), hashlib.sha256(json.dumps(edges).encode()).hexdigest()]
print(json.dumps(out))
"""


def kind_of(relative: str) -> str:
    """The file kind of a generation's file: ``triples``, ``mapped/triples``, ``mapped/fences`` ..."""
    parts = relative.split("/")
    if parts[0] == "mapped":
        if parts[-1] == "fences.arrow":
            return "mapped/fences"
        return f"mapped/{parts[1]}" if len(parts) > 2 else f"mapped/{parts[1].split('.')[0]}"
    return parts[0].removesuffix(".parquet").removesuffix(".json")


def sizes(generation_dir: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for path in generation_dir.rglob("*"):
        if path.is_file():
            kind = kind_of(path.relative_to(generation_dir).as_posix())
            out[kind] = out.get(kind, 0) + path.stat().st_size
    return dict(sorted(out.items()))


def child(code: str, args: list[str], source: Path) -> Any:
    env = {**os.environ, "PYTHONPATH": str(source)}
    # Run in ``source``: ``python -c`` puts the working directory first on the path.
    result = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, cwd=source, capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout.splitlines()[-1])


def measure(store: Path, builds: int, source: Path) -> dict[str, Any]:
    store = store.resolve()
    runs = []
    for _ in range(builds):
        runs.append(child(BUILD, [str(store)], source))
        for old in (store / "index").glob("gen-*"):
            if old.name != runs[-1]["generation"]:
                shutil.rmtree(old)
    generation_dir = store / "index" / runs[-1]["generation"]
    triples = runs[-1]["counts"]["triples"]
    by_kind = sizes(generation_dir)
    return {
        "triples": triples,
        "counts": runs[-1]["counts"],
        "build_seconds": [round(r["seconds"], 1) for r in runs],
        "build_median_s": round(statistics.median(r["seconds"] for r in runs), 1),
        "bytes": by_kind,
        "bytes_per_triple": {k: round(v / triples, 2) for k, v in by_kind.items()},
        "total_bytes": sum(by_kind.values()),
        "total_per_triple": round(sum(by_kind.values()) / triples, 2),
        "answers": child(ANSWERS, [str(store)], source),
    }


def compare(a: Path, b: Path) -> int:
    """Print both measurements as a Markdown table, and whether the answers agree."""
    first, second = json.loads(a.read_text()), json.loads(b.read_text())
    triples = first["triples"]
    print(f"| file kind | {first['label']}: MB | B/triple | {second['label']}: MB | B/triple |")
    print("|---|---:|---:|---:|---:|")
    for kind in sorted(set(first["bytes"]) | set(second["bytes"])):
        x, y = first["bytes"].get(kind, 0), second["bytes"].get(kind, 0)
        print(f"| {kind} | {x / 1e6:.1f} | {x / triples:.2f} | {y / 1e6:.1f} | {y / triples:.2f} |")
    x, y = first["total_bytes"], second["total_bytes"]
    print(f"| **total** | **{x / 1e6:.1f}** | **{x / triples:.2f}** | **{y / 1e6:.1f}** | **{y / triples:.2f}** |")
    for m in (first, second):
        print(f"build, {m['label']}: median {m['build_median_s']} s of {m['build_seconds']}")
    same = first["answers"] == second["answers"]
    print(f"{len(first['answers'])} answers identical: {same}")
    return 0 if same else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store", nargs="?", type=Path)
    parser.add_argument("--builds", type=int, default=3)
    parser.add_argument(
        "--source", type=Path, default=ROOT, help="directory holding the provplug package to build with"
    )
    parser.add_argument("--label", default="this tree")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"))
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    result = {"label": args.label, **measure(args.store, args.builds, args.source)}
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
