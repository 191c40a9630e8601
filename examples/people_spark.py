"""Capture the paper's running example from plain PySpark into STORE.

    python examples/people_spark.py STORE

Person1 -> R1 (filter Age >= 25) -> Person2 -> R2 (avg Age per City) -> AvgAge.
With Person1 in the paper's order this gives the 15 triples of Table 4. The
pipeline itself lives in ``provplug.cli.demo`` (it is also what ``provplug demo``
runs); it is plain PySpark:

    @provplug.step("R1", output="Person2")
    def adults(people):
        return people.filter(F.col("Age") >= 25)

    @provplug.step("R2", output="AvgAge")
    def average_age(people):
        return people.groupBy("City").agg(F.avg("Age").alias("Age"))
"""

from __future__ import annotations

import sys

from provplug.cli.demo import PERSON1, adults, average_age, capture_people, person1
from provplug.sparksession import local_spark

__all__ = ["PERSON1", "adults", "average_age", "capture_people", "person1"]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: " + __doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    spark = local_spark("provplug-people")
    try:
        capture_people(spark, argv[0])
    finally:
        spark.stop()
    print(f"captured Person1 -> R1 -> Person2 -> R2 -> AvgAge into {argv[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
