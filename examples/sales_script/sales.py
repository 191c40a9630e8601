"""A sales report: an ordinary PySpark script, with nothing of provplug in it.

    python sales.py DATA_DIR OUT_DIR [--fail-after-first-write | --exit-3]

reads ``DATA_DIR/orders.parquet`` and ``DATA_DIR/customers.csv``, joins them
into OUT_DIR/enriched, totals the orders per region into OUT_DIR/by_region,
then reads ``by_region`` back and writes the regions over 10 with their
average order as the CSV OUT_DIR/big_regions. Capture it with

    provplug run --store sales.prov sales.py DATA_DIR OUT_DIR

(The two flags make it fail after its first write; they exist for provplug's tests.)
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def main(argv: list[str]) -> None:
    data, out = argv[1], argv[2]
    spark = SparkSession.builder.appName("sales").getOrCreate()

    orders = spark.read.parquet(f"{data}/orders.parquet")
    customers = spark.read.option("header", True).option("inferSchema", True).csv(f"{data}/customers.csv")
    enriched = orders.join(customers, "customer_id")
    enriched.write.mode("overwrite").parquet(f"{out}/enriched")
    if "--fail-after-first-write" in argv:
        raise RuntimeError("stopped after the first write")
    if "--exit-3" in argv:
        sys.exit(3)

    by_region = enriched.groupBy("region").agg(F.sum("amount").alias("total"), F.count("order_id").alias("orders"))
    by_region.write.mode("overwrite").parquet(f"{out}/by_region")

    totals = spark.read.parquet(f"{out}/by_region")
    big = totals.filter(F.col("total") > 10).withColumn("avg_order", F.col("total") / F.col("orders"))
    big.write.mode("overwrite").option("header", True).csv(f"{out}/big_regions")


if __name__ == "__main__":
    main(sys.argv)
