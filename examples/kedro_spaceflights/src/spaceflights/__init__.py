"""spaceflights: a small Kedro project on PySpark, in the spirit of Kedro's spaceflights starter."""

__version__ = "0.1"
