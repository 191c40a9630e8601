"""The SparkSession of the project, as in Kedro's PySpark starter: built once
the context exists, from ``conf/base/spark.yml``."""

from __future__ import annotations

import os
import sys

from kedro.framework.context import KedroContext
from kedro.framework.hooks import hook_impl
from pyspark import SparkConf
from pyspark.sql import SparkSession


class SparkHooks:
    @hook_impl
    def after_context_created(self, context: KedroContext) -> None:
        """Start the project's SparkSession (``local[2]``, UI off)."""
        # Spark's Python workers run the interpreter of this `kedro run` (a
        # virtualenv's, say) unless told otherwise, so they import what the
        # driver imports.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        parameters = context.config_loader["spark"]
        conf = SparkConf().setAll(parameters.items())
        spark = SparkSession.builder.config(conf=conf).getOrCreate()
        spark.sparkContext.setLogLevel("WARN")
