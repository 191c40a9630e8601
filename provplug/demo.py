"""``provplug demo``: the paper's running example end to end, on embedded defaults.

Person1 -> R1 (keep Age >= 25) -> Person2 -> R2 (average Age per City) -> AvgAge,
captured from plain PySpark on a local Spark into a store directory, indexed,
and the lineage of New York's average age printed.
"""

from __future__ import annotations

import argparse
from typing import Any

import provplug

from .errors import StoreError
from .progress import Progress

PERSON1 = [("Steve", "NY", 30), ("Mark", "NY", 40), ("Shane", "LA", 40), ("Mary", "NY", 20)]
DEFAULT_STORE = "provplug-demo.prov"


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
    p.add_argument("store", metavar="STORE", nargs="?", default=DEFAULT_STORE,
                   help=f"a new store directory (default: {DEFAULT_STORE})")
    p.set_defaults(func=_cmd_demo)


def _cmd_demo(args: argparse.Namespace) -> int:
    from .index.build import build_index
    from .plugins import open_store
    from .sparksession import local_spark

    store = open_store(args.store)
    if store.exists():
        raise StoreError(f"{args.store} already exists; give the demo a new store path")
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
