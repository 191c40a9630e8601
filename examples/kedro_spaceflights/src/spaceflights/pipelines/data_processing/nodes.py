"""Nodes of the data_processing pipeline: plain PySpark, no provplug."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def _percentage(column: str) -> F.Column:
    return F.regexp_replace(F.col(column), "%", "").cast("double") / 100


def _money(column: str) -> F.Column:
    return F.regexp_replace(F.col(column), "[$,]", "").cast("double")


def preprocess_companies(companies: DataFrame) -> DataFrame:
    """``"67%"`` -> ``0.67``; ``"t"``/``"f"`` -> a boolean."""
    return companies.select(
        "id",
        _percentage("company_rating").alias("company_rating"),
        "company_location",
        (F.col("iata_approved") == "t").alias("iata_approved"),
    )


def preprocess_shuttles(shuttles: DataFrame) -> DataFrame:
    """``"$1,325.0"`` -> ``1325.0``."""
    return shuttles.withColumn("price", _money("price"))


def create_model_input_table(shuttles: DataFrame, companies: DataFrame, reviews: DataFrame) -> DataFrame:
    """One row per reviewed shuttle, with its company (unreviewed shuttles are left out)."""
    rated = shuttles.withColumnRenamed("id", "shuttle_id").join(reviews, on="shuttle_id")
    with_company = rated.join(companies.withColumnRenamed("id", "company_id"), on="company_id")
    return with_company.select(
        "shuttle_id",
        "company_id",
        "shuttle_type",
        "engines",
        "passenger_capacity",
        "price",
        "review_scores_rating",
        "number_of_reviews",
        "company_rating",
        "company_location",
        "iata_approved",
    )
