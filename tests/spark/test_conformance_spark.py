"""The Spark adapter passes provplug.testing's contract on a small pipeline:
a filter, a keyed aggregate and a row-aligned step (stored as a location
edge) over a one-partition source."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

import provplug
from provplug.testing import AdapterContract

from .helpers import F

PEOPLE = (
    [("Steve", "NY", 30), ("Mark", "NY", 40), ("Shane", "LA", 40), ("Mary", "NY", 20)],
    "Name string, City string, Age int",
)


@provplug.step("Adults", output="Grown")
def adults(people: Any) -> Any:
    return people.filter(F.col("Age") >= 25)


@provplug.step("Average", output="AvgAge")
def average_age(people: Any) -> Any:
    return people.groupBy("City").agg(F.avg("Age").alias("Age"))


@provplug.step("Decades", output="WithDecade")
def decades(people: Any) -> Any:
    return people.withColumn("Decade", (F.col("Age") / 10).cast("int"))


def explode(age: int) -> int:
    raise RuntimeError(f"broken on {age}")


@provplug.step("Broken", output="Never")
def broken(people: Any) -> Any:
    # Fails in the output's background write, on the workers: raised when the block ends.
    return people.withColumn("Boom", F.udf(lambda age: explode(age), "int")(F.col("Age")))  # no hints to infer from


class TestSparkContract(AdapterContract):
    adapter_name = "spark"

    @pytest.fixture(scope="class")
    @classmethod
    def new_engine(cls, spark: Any) -> Callable[[], object]:
        return lambda: spark

    def pipeline(self, run: Any) -> Mapping[str, Any]:
        people = run.source(run.engine.createDataFrame(*PEOPLE).coalesce(1), "People")
        grown = adults(people)
        return {"Grown": grown, "AvgAge": average_age(grown), "WithDecade": decades(grown)}

    def produced(self, outputs: Mapping[str, Any]) -> Mapping[str, list[dict[str, Any]]]:
        return {name: [row.asDict() for row in frame.collect()] for name, frame in outputs.items()}

    def failing_pipeline(self, run: Any) -> None:
        broken(adults(run.source(run.engine.createDataFrame(*PEOPLE).coalesce(1), "People")))
