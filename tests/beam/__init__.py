"""Tests of the Apache Beam adapter (``provplug_beam``), one module per adapter module."""
