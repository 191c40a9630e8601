"""Capture the paper's running example from an Apache Beam pipeline into STORE.

    python examples/people_beam.py STORE

Person1 -> R1 (keep Age >= 25) -> Person2 -> R2 (average Age per City) -> AvgAge,
on Beam's DirectRunner. It yields the same 15 triples as the paper's Table 4
(and as examples/people_spark.py); only the row order of AvgAge is Beam's own.
"""

from __future__ import annotations

import sys

import apache_beam as beam
from apache_beam.transforms.combiners import MeanCombineFn

import provplug

# The paper's Person1, in its order (row numbers 0..3).
PERSON1 = [
    beam.Row(Name="Steve", City="NY", Age=30),
    beam.Row(Name="Mark", City="NY", Age=40),
    beam.Row(Name="Shane", City="LA", Age=40),
    beam.Row(Name="Mary", City="NY", Age=20),
]


@provplug.step("R1", output="Person2")
def adults(people: beam.PCollection[beam.Row]) -> beam.PCollection[beam.Row]:
    return people | "Age >= 25" >> beam.Filter(lambda p: p.Age >= 25)


@provplug.step("R2", output="AvgAge")
def average_age(people: beam.PCollection[beam.Row]) -> beam.PCollection[beam.Row]:
    return people | "avg Age per City" >> beam.GroupBy("City").aggregate_field("Age", MeanCombineFn(), "Age")


def capture_people(store: str) -> None:
    """Build the pipeline inside the capture block; it runs when the block ends."""
    with beam.Pipeline() as pipeline, provplug.capture(pipeline, store=store) as run:
        person1 = run.source(PERSON1, "Person1")
        average_age(adults(person1))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    capture_people(argv[0])
    print(f"captured Person1 -> R1 -> Person2 -> R2 -> AvgAge into {argv[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
