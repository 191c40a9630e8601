"""What both index engines share: their input statistics and the set plan.

Algorithm 3 is run level-synchronously for all large components at once:
at split depth ``d`` every still-active value (one of a set with at least
``theta`` nodes whose split has sub-splits) is keyed by the depth-``d`` split
of its table; edges are kept only between active values of the same current
set and the same key; the weakly connected components of those edges are the
new sets (id = smallest value id). A value with no kept edge is a set of its
own. This is exactly the recursion of Partition-Large-Component, with the
splits of one depth processed together instead of one call per component.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from provplug.index.splits import CompiledSplits


@dataclasses.dataclass(frozen=True)
class InputStats:
    """Counts an engine gathers while loading (table codes, not names)."""

    triples: int
    values: int
    table_values: dict[int, int]
    pair_triples: list[tuple[int, int, int]]


@dataclasses.dataclass(frozen=True)
class SetPlan:
    theta: int
    splits: CompiledSplits


@dataclasses.dataclass(frozen=True)
class OutputDir:
    """A folder of the store as pyarrow addresses it (``path``, on the
    store's filesystem) and as Spark does (``spark_path``): where an engine
    writes a generation, and the Spark engine its intermediates."""

    path: str
    spark_path: str


class IndexEngine(Protocol):
    """What :func:`provplug.index.build_index` asks of an engine (local or Spark)."""

    name: str

    def load(self) -> InputStats:
        """Read the committed triples; return the counts the split choice needs."""
        ...

    def build(self, plan: SetPlan, out: OutputDir) -> dict[str, int]:
        """Write the generation's data files into ``out``; return ``meta.json``'s counts."""
        ...
