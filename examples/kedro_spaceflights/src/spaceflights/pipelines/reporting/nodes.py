"""Nodes of the reporting pipeline: plain PySpark, no provplug."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def summarise_by_location(model_input_table: DataFrame) -> DataFrame:
    """Average price and total reviews of the reviewed shuttles, per company location."""
    return model_input_table.groupBy("company_location").agg(
        F.round(F.avg("price"), 2).alias("avg_price"),
        F.sum("number_of_reviews").alias("reviews"),
    )


def top_rated_shuttles(model_input_table: DataFrame, top_n: int) -> DataFrame:
    """The ``top_n`` best-reviewed shuttles."""
    if top_n < 1:
        raise ValueError(f"reporting.top_n must be at least 1, not {top_n}")
    best = model_input_table.orderBy(F.col("review_scores_rating").desc(), "shuttle_id").limit(top_n)
    return best.select("shuttle_id", "shuttle_type", "company_location", "company_rating", "review_scores_rating")
