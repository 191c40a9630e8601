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

from .splits import CompiledSplits


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
