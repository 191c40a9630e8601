"""Capture overhead on a Spark standalone cluster against ``local[2]`` (issue 27; a benchmark, not a test).

    nice -n 10 python examples/benchmarks/cluster_capture.py [--runs 3] [--warmup 1] [--out FILE.md]

Starts what tests/cluster starts (moto's S3 server and a standalone master
with one worker of 1 core, 1 GiB, all on 127.0.0.1), then two driver
processes, one after the other: one on the cluster, one on ``local[2]``.
Each driver keeps ONE SparkSession (so JVM and executor start are not
timed) and, ``--warmup`` + ``--runs`` times, runs side by side:

* the README's people pipeline: plain (its result collected) and captured
  (:func:`provplug.cli.demo.capture_people`);
* the sales example (examples/sales_script): plain (the script's ``main``)
  and captured (:func:`provplug.ingest.scripts.run_script`, what
  ``provplug run`` does);

captured into a fresh store each time: on the cluster to the S3 server and
to a local directory (declared shared, ``spark.provplug.sharedStore=true``:
the worker runs on this machine), on ``local[2]`` to a local directory.
Figures are medians of wall-clock seconds; the overhead is captured / plain
of the same driver and round. The result is written as Markdown to
``--out`` (default: cluster_capture.md next to this script).
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import runpy
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SALES = REPO / "examples" / "sales_script"
CLUSTER_TESTS = REPO / "tests" / "cluster"
# The cluster's executors: what the cluster tests give them.
CLUSTER_CONF = {"spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "1"}


def timed(action: Callable[[], None]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def drive(master: str, stores: dict[str, str], runs: int, warmup: int, work: Path) -> dict[str, list[float]]:
    """In this process: one session on ``master``; per round, plain and
    captured runs of both pipelines (captured into each of ``stores``: label ->
    a URI prefix or a local directory, a fresh store per run). Seconds per cell."""
    from provplug.cli.demo import adults, average_age, capture_people, person1
    from provplug.ingest.scripts import run_script
    from provplug.sparksession import local_spark

    spark = local_spark("provplug-cluster-bench", master, **CLUSTER_CONF, **{"spark.provplug.sharedStore": "true"})
    sales = runpy.run_path(str(SALES / "sales.py"), run_name="sales")["main"]
    times: dict[str, list[float]] = {}
    try:
        for round_ in range(warmup + runs):
            out = work / f"out{round_}"
            cells: dict[str, Callable[[], None]] = {
                "people plain": lambda: _collect(average_age(adults(person1(spark)))),
                "sales plain": functools.partial(sales, ["sales.py", str(SALES / "data"), str(out / "plain")]),
            }
            for label, root in stores.items():
                sales_out = out / label.replace(" ", "-")
                people_store, sales_store = store_uri(root, f"people-{round_}"), store_uri(root, f"sales-{round_}")
                cells[f"people captured ({label})"] = functools.partial(capture_people, spark, people_store)
                cells[f"sales captured ({label})"] = functools.partial(
                    _captured_sales, run_script, sales_store, sales_out
                )
            for name, action in cells.items():
                seconds = timed(action)
                if round_ >= warmup:
                    times.setdefault(name, []).append(seconds)
    finally:
        spark.stop()
    return times


def _collect(frame: Any) -> None:
    """The plain pipeline's result, computed (the captured run computes and stores it)."""
    frame.collect()


def _captured_sales(run_script: Any, store: str, out: Path) -> None:
    status, run = run_script(str(SALES / "sales.py"), [str(SALES / "data"), str(out)], store)
    if status != 0 or run is None:
        raise RuntimeError(f"provplug run of the sales example into {store} failed (status {status})")


def _driver_command(master: str, stores: dict[str, str], args: argparse.Namespace, result: Path) -> list[str]:
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        "--driver",
        master,
        "--stores",
        json.dumps(stores),
        "--runs",
        str(args.runs),
        "--warmup",
        str(args.warmup),
        "--result",
        str(result),
    ]


def measure(args: argparse.Namespace, work: Path) -> tuple[dict[str, dict[str, list[float]]], list[float]]:
    """Both drivers' seconds per cell, and the load averages seen around them."""
    sys.path.insert(0, str(CLUSTER_TESTS))
    from servers import s3_server, spark_cluster  # type: ignore[import-not-found]

    loads = [os.getloadavg()[0]]
    with s3_server(work) as s3, spark_cluster(work, s3.env(), workers=1) as cluster:
        env = {**os.environ, **s3.env(), "PYTHONPATH": str(REPO)}
        configs = {
            "cluster": (cluster.master, {"S3": _s3_root(s3), "shared local disk": str(work / "cluster-stores")}),
            "local[2]": ("local[2]", {"local disk": str(work / "local-stores")}),
        }
        results = {}
        for name, (master, stores) in configs.items():
            result = work / f"{name}.json"
            subprocess.run(_driver_command(master, stores, args, result), env=env, check=True)
            results[name] = json.loads(result.read_text())
            loads.append(os.getloadavg()[0])
    return results, loads


def _s3_root(s3: Any) -> str:
    """The S3 stores' common root; each store's URI is ROOT/name plus the endpoint query."""
    return "S3:" + json.dumps({"bucket": s3.bucket, "uri": s3.uri("{name}")})


def store_uri(root: str, name: str) -> str:
    """A store called ``name`` under ``root`` (a directory, or an S3 root of :func:`_s3_root`)."""
    if root.startswith("S3:"):
        return str(json.loads(root[3:])["uri"]).replace("{name}", f"bench/{name}")
    return f"{root}/{name}"


def report(results: dict[str, dict[str, list[float]]], loads: list[float], args: argparse.Namespace) -> str:
    rows = []
    for config, cells in results.items():
        for pipeline in ("people", "sales"):
            plain = statistics.median(cells[f"{pipeline} plain"])
            for name, seconds in cells.items():
                if not name.startswith(f"{pipeline} captured"):
                    continue
                where = name.split("(", 1)[1].rstrip(")")
                captured = statistics.median(seconds)
                rows.append(
                    f"| {pipeline} | {config} | {where} | {plain:.2f} | {captured:.2f} | {captured / plain:.2f}x |"
                )
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join(
        [
            "# Capture on a Spark standalone cluster against local[2] (issue 27)",
            "",
            f"`nice -n 10 python examples/benchmarks/cluster_capture.py --runs {args.runs} --warmup {args.warmup}`,"
            f" {now}, {os.cpu_count()} cores shared with other jobs; 1-minute load average "
            + " / ".join(f"{load:.1f}" for load in loads)
            + " (before, after the cluster driver, after the local[2] driver).",
            "",
            "The cluster: a standalone master and one worker (1 core, 1 GiB) from the pyspark wheel on 127.0.0.1,"
            " moto's S3 server on 127.0.0.1. One driver process per row group, one SparkSession each (JVM and"
            " executor start are not timed); every cell is the median of"
            f" {args.runs} runs after {args.warmup} warm-up round(s), plain and captured run side by side in each"
            " round, a fresh store per captured run.",
            "",
            "| pipeline | master | store | plain (s) | captured (s) | captured / plain |",
            "|---|---|---|---:|---:|---:|",
            *rows,
            "",
            READING,
        ]
    )


READING = (
    "How to read it: captured / plain is the ratio of the two medians of one driver; both are measured"
    " round by round in the same session, so they share the machine's load, while the absolute seconds"
    " depend on it. The pipelines are tiny (4 and 5 rows): the figures are the fixed costs of a capture"
    " (per written table: rows, triples, read-back; per run: the commit), not a cost per row."
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_suffix(".md"))
    parser.add_argument("--driver", help=argparse.SUPPRESS)  # the driver process: its master
    parser.add_argument("--stores", help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="provplug-cluster-bench-"))
    try:
        if args.driver:
            roots = json.loads(args.stores)
            times = drive(args.driver, roots, args.runs, args.warmup, work)
            args.result.write_text(json.dumps(times))
            return
        results, loads = measure(args, work)
        text = report(results, loads, args)
        args.out.write_text(text + "\n")
        print(text)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
