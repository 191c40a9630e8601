"""Old home of the group-join setting's name, which is now in :mod:`.groupjoin`.

Kept only so that ``examples/benchmarks/capture_bench.py`` (``from
provplug_spark.jvm import GROUP_JOINS_CONF``) still runs; delete this module
once it imports from :mod:`provplug_spark.groupjoin`. Nothing else is here:
the rewrite is in :mod:`.rewrite` and :mod:`.rules`, py4j plumbing in
:mod:`._jvm`.
"""

from .groupjoin import GROUP_JOINS_CONF

__all__ = ["GROUP_JOINS_CONF"]
