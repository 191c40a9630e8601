"""What a reduction is: a named, seeded choice of the rows of a source table
that keep provenance (paper 001, Chapter 4), and the technique that builds it.

A :class:`Reduction` selects the kept rows of a Spark DataFrame *in Spark*,
beside the data, deterministically for its seed: the same rows for the same
table content, whatever its partitioning or row order (random choices come
from a seeded hash of each row's values, never from an RNG). Nothing here
imports Spark; the built-in techniques (:mod:`provplug.reduce.techniques`)
import it when they select.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from provplug.errors import ReductionError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

MODES = ("thesis", "production")
VARIANTS = ("eliminate", "sample")


@dataclasses.dataclass(frozen=True)
class Reduction:
    """A reduction of one source table: technique ``name``, its ``params``
    (named as the thesis names them) and ``seed``.

    Subclasses implement :meth:`select`.
    """

    name: str
    params: Mapping[str, Any]
    seed: int = 0

    def select(self, frame: DataFrame, columns: Sequence[str] | None = None) -> DataFrame:
        """The kept rows of ``frame``, with all of its columns.

        ``columns`` are the table's own columns (the default: all of
        ``frame``'s): the only ones a random choice hashes, so that extra
        columns (the stored row number) never change which rows are kept.
        """
        raise NotImplementedError

    def record(self) -> dict[str, Any]:
        """The reduction as a run's manifest records it (JSON data)."""
        return {
            "technique": self.name,
            "params": json.loads(json.dumps(dict(self.params), default=str)),
            "seed": self.seed,
        }

    def __str__(self) -> str:
        return describe(self.record())


def describe(record: Mapping[str, Any]) -> str:
    """``sample(ratio=0.33, seed=1)``: a recorded reduction as one line."""
    params = ", ".join(f"{k}={_text(v)}" for k, v in record.get("params", {}).items() if v is not None)
    seed = f"seed={record.get('seed', 0)}"
    return f"{record.get('technique', '?')}({', '.join(p for p in (params, seed) if p)})"


def describe_run_reduction(reduction: Mapping[str, Any]) -> str:
    """``thesis: Weather=sample(ratio=0.33, seed=1)``: a run's reduction (its
    manifest's ``reduction`` entry) as one line."""
    tables = "; ".join(f"{t}={describe(r)}" for t, r in sorted(reduction.get("tables", {}).items()))
    return f"{reduction.get('mode', '?')}: {tables}"


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "|".join(_text(v) for v in value)
    return str(value)


@runtime_checkable
class ReductionTechnique(Protocol):
    """A reduction technique as plugins register it
    (``provplug_register_reductions``): ``name`` is what a spec string
    (``TABLE=NAME:key=value,...``) selects; ``build`` makes the reduction
    from the spec's parameters (strings already converted to numbers, booleans
    and ``|``-separated lists) and its seed."""

    name: str
    description: str

    def build(self, params: Mapping[str, Any], seed: int) -> Reduction: ...


def check_ratio(ratio: Any, what: str = "ratio") -> float:
    """``ratio`` as a float in (0, 1], else a :class:`ReductionError`."""
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < float(ratio) <= 1:
        raise ReductionError(f"{what} must be a number in (0, 1], not {ratio!r}")
    return float(ratio)


def check_variant(variant: Any) -> str:
    if variant not in VARIANTS:
        raise ReductionError(
            f"variant must be 'eliminate' (drop whole groups) or 'sample' (sample within groups), not {variant!r}"
        )
    return str(variant)


def check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ReductionError(f"seed must be an integer, not {seed!r}")
    return seed
