"""``provplug run`` overhead on the sales example (a benchmark, not a test).

    python examples/benchmarks/run_script_bench.py [--runs 5] [--warmup 1] [--orders 0]

Runs examples/sales_script/sales.py in ONE process (one local[2]
SparkSession), alternating a plain run (the script's ``main``, as ``python
sales.py`` runs it) and a run under :func:`provplug.ingest.scripts.run_script`
(what ``provplug run --store S sales.py DATA OUT`` does) into a fresh store,
``--runs`` times after ``--warmup`` untimed rounds of both. Figures are medians
of wall-clock seconds.

``--orders N`` (N > 0) runs it on generated data instead of the shipped five
orders: N orders over 1,000 customers in 4 regions (a fixed seed), so that the
cost of computing each written plan shows beside the fixed per-write costs.
"""

from __future__ import annotations

import argparse
import runpy
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from provplug.ingest.scripts import run_script
from provplug.sparksession import local_spark

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "sales_script" / "sales.py"
SHIPPED = REPO / "examples" / "sales_script" / "data"


def generated_data(spark: Any, orders: int, into: Path) -> Path:
    """``orders.parquet`` (order_id, customer_id, amount) and ``customers.csv`` (customer_id, region)."""
    from pyspark.sql import functions as F

    spark.range(orders).select(
        F.col("id").alias("order_id"),
        (F.col("id") % 1000 + 1).alias("customer_id"),
        F.round(F.rand(7) * 100, 2).alias("amount"),
    ).write.parquet(str(into / "orders.parquet"))
    regions = F.element_at(
        F.array(*[F.lit(r) for r in ("north", "south", "east", "west")]), (F.col("id") % 4 + 1).cast("int")
    )
    customers = spark.range(1, 1001).select(F.col("id").alias("customer_id"), regions.alias("region"))
    customers.coalesce(1).write.option("header", True).csv(str(into / "customers.csv"))
    return into


def timed(action: Any) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--orders", type=int, default=0, help="generated orders (0: the shipped data)")
    args = parser.parse_args()
    spark = local_spark("provplug-run-bench", "local[2]", **{"spark.sql.shuffle.partitions": "4"})
    work = Path(tempfile.mkdtemp(prefix="provplug-run-bench-"))
    try:
        data = generated_data(spark, args.orders, work / "data") if args.orders else SHIPPED
        sales = runpy.run_path(str(SCRIPT), run_name="sales")["main"]
        plain, captured = [], []
        for round_ in range(args.warmup + args.runs):
            out = work / f"out{round_}"

            def plain_run(out: Path = out) -> None:
                sales(["sales.py", str(data), str(out / "plain")])

            def captured_run(out: Path = out) -> None:
                status, run = run_script(str(SCRIPT), [str(data), str(out / "captured")], out / "s.prov")
                assert status == 0 and run is not None

            times = timed(plain_run), timed(captured_run)
            if round_ >= args.warmup:
                plain.append(times[0])
                captured.append(times[1])
            shutil.rmtree(out)
        p, c = statistics.median(plain), statistics.median(captured)
        print(f"sales ({args.orders or 5} orders), median of {args.runs}: plain {p:.2f} s, provplug run {c:.2f} s")
        print(f"overhead: {c / p:.2f}x ({c - p:+.2f} s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        spark.stop()


if __name__ == "__main__":
    main()
