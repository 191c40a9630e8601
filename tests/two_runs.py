"""A store with two runs that both wrote a table called ``Person2``, for the
browse and run-management tests.

Run 1 (capture, Spark): source ``Person1`` (3 rows), step ``R1`` keeps the
rows with ``Age >= 25`` as ``Person2`` (Steve, Mark: 2 rows, 3 columns, so
6 copy triples). Run 2 (import, newer): ``Person2.Age`` values 101 and 102
are summed by op ``R9`` into ``Report.Total`` value 103 (2 triples).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import provplug

PEOPLE = [("Steve", "NY", 30), ("Mark", "NY", 40), ("Mary", "LA", 20)]
IMPORT_TRIPLES = "src,dst,op\n101,103,R9\n102,103,R9\n"
IMPORT_VALUES = "value_id,table,column\n101,Person2,Age\n102,Person2,Age\n103,Report,Total\n"


@provplug.step("R1", output="Person2")
def adults(df: Any) -> Any:
    from pyspark.sql import functions as F

    return df.filter(F.col("Age") >= 25)


def build(spark: Any, folder: Path) -> Path:
    """The two-run store in ``folder`` (indexed after both runs)."""
    store = folder / "two.prov"
    people = spark.createDataFrame(PEOPLE, "Name string, City string, Age int").coalesce(1)
    with provplug.capture(spark, store=store) as run:
        adults(run.source(people, "Person1"))
    triples, values = folder / "t.csv", folder / "v.csv"
    triples.write_text(IMPORT_TRIPLES)
    values.write_text(IMPORT_VALUES)
    opened = provplug.open(store)
    opened.import_(triples, values)
    opened.index(engine="local")
    return store


def copy(store: Path, folder: Path) -> Path:
    """A private copy of ``store`` for a test that changes it."""
    target = folder / store.name
    shutil.copytree(store, target)
    return target
