"""What a query method returns, in value ids (the records a query-method plugin
builds, passed on to the answer builder)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

Direction = Literal["up", "down"]
ExecutionPath = Literal["driver", "spark"]
DIRECTIONS: tuple[Direction, ...] = ("up", "down")


@dataclass(frozen=True)
class Edges:
    """Triples as parallel int64 arrays (``src[i] -> dst[i]`` by op ``op[i]``)."""

    src: np.ndarray
    dst: np.ndarray
    op: np.ndarray

    @classmethod
    def empty(cls) -> Edges:
        e = np.empty(0, dtype=np.int64)
        return cls(e, e, e)

    @classmethod
    def concat(cls, parts: list[Edges]) -> Edges:
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0]
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("src", "dst", "op")))

    def sorted(self) -> Edges:
        order = np.lexsort((self.op, self.src, self.dst))
        return Edges(self.src[order], self.dst[order], self.op[order])

    def __len__(self) -> int:
        return len(self.src)


@dataclass(frozen=True)
class Walk:
    """What a recursion found: the lineage values (query values excluded) and
    every triple among the query and lineage values."""

    lineage: np.ndarray
    edges: Edges


@dataclass
class MethodResult:
    """A method's answer in ids, with the statistics of how it was found."""

    walk: Walk
    path: ExecutionPath
    sets_read: int
    triples_scanned: int
    extra: dict[str, object] = field(default_factory=dict)
