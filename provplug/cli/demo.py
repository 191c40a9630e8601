"""``provplug demo``: the paper's running example end to end, on embedded defaults.

Person1 -> R1 (keep Age >= 25) -> Person2 -> R2 (average Age per City) -> AvgAge,
captured from plain PySpark on a local Spark into a store directory, indexed,
and the lineage of New York's average age printed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from typing import Any

import provplug
from provplug.errors import StoreError
from provplug.progress import Progress

PERSON1 = [("Steve", "NY", 30), ("Mark", "NY", 40), ("Shane", "LA", 40), ("Mary", "NY", 20)]
DEFAULT_STORE = "provplug-demo.prov"
DEMO_TABLES = {"Person1", "Person2", "AvgAge"}


@provplug.step("R1", output="Person2")
def adults(people: Any) -> Any:
    from pyspark.sql import functions as F

    return people.filter(F.col("Age") >= 25)


@provplug.step("R2", output="AvgAge")
def average_age(people: Any) -> Any:
    from pyspark.sql import functions as F

    return people.groupBy("City").agg(F.avg("Age").alias("Age"))


def person1(spark: Any) -> Any:
    # One partition keeps the paper's row order (Steve, Mark, Shane, Mary).
    return spark.createDataFrame(PERSON1, "Name string, City string, Age int").coalesce(1)


def capture_people(spark: Any, store: str) -> None:
    """Capture one run of the running example into ``store``."""
    with provplug.capture(spark, store=store) as run:
        average_age(adults(run.source(person1(spark), "Person1")))


def add_parser(sub: Any) -> None:
    p = sub.add_parser("demo", help="capture, index and query the paper's running example (local Spark)")
    p.add_argument(
        "store",
        metavar="STORE",
        nargs="?",
        default=DEFAULT_STORE,
        help=f"a new store directory, or one an earlier demo wrote, which is replaced (default: {DEFAULT_STORE})",
    )
    p.set_defaults(func=_cmd_demo)


def _cmd_demo(args: argparse.Namespace) -> int:
    from provplug.index.build import build_index
    from provplug.sparksession import local_spark
    from provplug.store.open import open_store

    store = open_store(args.store)
    if store.exists():
        _replace_earlier_demo(store, args.store)
    progress = Progress()
    progress.done("starting local Spark")
    spark = local_spark("provplug-demo")
    capture_people(spark, args.store)
    progress.done("captured Person1 -> R1 -> Person2 -> R2 -> AvgAge")
    build_index(store, spark=spark, progress=progress)
    answer = provplug.open(args.store).lineage(table="AvgAge", column="Age", where="City = 'NY'")
    print(f"Lineage of AvgAge.Age where City = 'NY' (store: {args.store}):\n")
    print(answer.render())
    print(f"\nTry: provplug lineage {args.store} AvgAge.Age --where \"City = 'LA'\" --json")
    return 0


def _is_earlier_demo(store: Any) -> bool:
    """Does ``store`` hold one capture of this demo and nothing else?"""
    runs = store.runs()
    if len(runs) != 1 or runs[0]["kind"] != "capture":
        return False
    return set(store.tables().column("name").to_pylist()) == DEMO_TABLES


def _replace_earlier_demo(store: Any, name: str) -> None:
    """Remove the store an earlier ``provplug demo`` wrote, saying so; refuse any other store.

    Running the demo again should show the same capture and the same answer
    (the same value ids): reusing the store would skip the capture, and adding
    a second run would make every table name ambiguous. Only a local store
    that holds the demo's one run is removed, so no other data is ever lost.
    """
    if not getattr(store, "local", False) or not _is_earlier_demo(store):
        raise StoreError(
            f"{name} already exists and is not a store of an earlier provplug demo; give the demo a new store path"
        )
    print(f"provplug demo: replacing {name}, the store of an earlier provplug demo", file=sys.stderr)
    shutil.rmtree(store.root)
