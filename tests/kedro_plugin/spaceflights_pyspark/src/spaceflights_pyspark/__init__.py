"""Spaceflights PySpark
"""

__version__ = "0.1"
