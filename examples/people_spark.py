"""Capture the paper's running example from plain PySpark into STORE.

    python examples/people_spark.py STORE

Person1 -> R1 (filter Age >= 25) -> Person2 -> R2 (avg Age per City) -> AvgAge.
With Person1 in the paper's order this gives the 15 triples of Table 4.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import provplug

PERSON1 = [("Steve", "NY", 30), ("Mark", "NY", 40), ("Shane", "LA", 40), ("Mary", "NY", 20)]


@provplug.step("R1", output="Person2")
def adults(people: DataFrame) -> DataFrame:
    return people.filter(F.col("Age") >= 25)


@provplug.step("R2", output="AvgAge")
def average_age(people: DataFrame) -> DataFrame:
    return people.groupBy("City").agg(F.avg("Age").alias("Age"))


def person1(spark: SparkSession) -> DataFrame:
    # One partition keeps the paper's row order (Steve, Mark, Shane, Mary).
    return spark.createDataFrame(PERSON1, "Name string, City string, Age int").coalesce(1)


def capture_people(spark: SparkSession, store: str) -> None:
    with provplug.capture(spark, store=store) as run:
        p1 = run.source(person1(spark), "Person1")
        average_age(adults(p1))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[*]")
        .appName("provplug-people")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    try:
        capture_people(spark, argv[0])
    finally:
        spark.stop()
    print(f"captured Person1 -> R1 -> Person2 -> R2 -> AvgAge into {argv[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
