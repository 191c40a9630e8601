"""Tests of the PySpark adapter (``provplug_spark``), one module per adapter module."""
