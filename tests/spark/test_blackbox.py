"""Black-box group and partition functions (provplug_spark.blackbox):
applyInPandas and mapInPandas."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

import provplug
from provplug.store.open import open_store

from .helpers import (
    S_ROWS,
    Label,
    capture,
    expect,
    labelled_triples,
    ops,
    table_rows,
)


def test_apply_in_pandas_and_map_in_pandas_are_black_boxes(spark: Any, store_path: Path) -> None:
    """Every output cell of a group function depends on every cell of its
    group; of a partition function, on every cell of the batches it had read
    (one batch here: the whole one-partition source)."""

    # Local functions: pickled by value for the Python workers.
    def _centred(pdf: pd.DataFrame) -> pd.DataFrame:
        return pdf.assign(age=pdf.age - pdf.age.mean())[["city", "age"]]

    def _total(key: tuple[Any, ...], pdf: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame([(*key, int(pdf.age.sum()))])  # labels by position, as PySpark allows

    def _older(batches: Any) -> Any:
        for pdf in batches:
            yield pdf[pdf.age > 35][["city", "age"]]

    def _ny_only(pdf: pd.DataFrame) -> pd.DataFrame:  # no rows, and no columns either, for other groups
        return pdf[["city", "w"]] if (pdf.city == "NY").all() else pd.DataFrame()

    def _nothing(batches: Any) -> Any:
        for pdf in batches:
            yield pdf[pdf.age > 100][["city", "age"]]

    @provplug.step("BB", output=("Centred", "Totals", "Older", "NYOnly", "Nothing"))
    def opaque(df: Any) -> Any:
        return (
            df.groupBy("city").applyInPandas(_centred, schema="city string, age double"),
            df.groupBy("city").applyInPandas(_total, schema="city string, total long"),
            df.mapInPandas(_older, schema="city string, age int"),
            df.groupBy("city").applyInPandas(_ny_only, schema="city string, w int"),
            df.mapInPandas(_nothing, schema="city string, age int"),
        )

    capture(spark, store_path, {"S": S_ROWS}, lambda f: opaque(f["S"]))
    members = {"NY": (30, 40), "LA": (50,)}

    def received(ages: Sequence[int]) -> list[Label]:
        return [("S", c, a) for a in ages for c in ("city", "age", "w")]

    want = expect(
        "BB",
        "Centred",
        {
            (col, key): received(members[key[0]])
            for key in (("NY", -5.0), ("NY", 5.0), ("LA", 0.0))
            for col in ("city", "age")
        },
    )
    want |= expect(
        "BB", "Totals", {(col, city): received(ages) for city, ages in members.items() for col in ("city", "total")}
    )
    want |= expect(
        "BB",
        "Older",
        {(col, key): received((30, 40, 50)) for key in (("NY", 40), ("LA", 50)) for col in ("city", "age")},
    )
    want |= expect("BB", "NYOnly", {(col, w): received((30, 40)) for w in (1, 2) for col in ("city", "w")})
    keys = {"S": ("age",), "Centred": ("city", "age"), "Older": ("city", "age"), "NYOnly": ("w",)}
    assert labelled_triples(store_path, keys) == want
    assert ops(store_path)["BB"]["kind"] == "udf"
    assert sorted(r["total"] for r in table_rows(store_path, "Totals")) == [50, 70]
    assert {t["name"]: t["rows"] for t in open_store(store_path).tables().to_pylist()}["Nothing"] == 0
