"""The subgraph query (Lipstick §5.1): the queried values' ancestors, their
descendants, and the other parents of each descendant, as one answer.

"Siblings of the descendants" is not defined by the paper; provplug reads it
as the digest proposes (§2.5): every parent of a descendant that is not
already in the answer. The answer's ``direction`` is ``"both"``; each lineage
record carries a ``role``: ``ancestor``, ``descendant`` or ``other parent``
(a cell that is both an ancestor and a parent of a descendant is an ancestor).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from provplug import sortedints
from provplug.plugin.protocols import Store
from provplug.plugin.query_results import Edges
from provplug.query.answer import LineageAnswer
from provplug.query.catalog import catalog_for
from provplug.query.methods import QueryContext, _whole_table

SUBGRAPH = "both"
ROLES = ("ancestor", "descendant", "other parent")


class Queries(Protocol):
    """What the subgraph query needs of :class:`~provplug.api.ProvenanceStore`."""

    store: Store

    def lineage(self, *args: Any, **kwargs: Any) -> LineageAnswer: ...


def subgraph(store: Queries, query: dict[str, Any]) -> LineageAnswer:
    """The subgraph of the values ``query`` (keyword arguments of
    :meth:`ProvenanceStore.lineage`, without ``direction``) selects."""
    up = store.lineage(**query, direction="up")
    down = store.lineage(**query, direction="down")
    descendants = np.array(sorted(down.value_ids), dtype=np.int64)
    parent_edges = _parents_of(store, descendants, query.get("method", "auto"), query.get("tau"))
    catalog = catalog_for(store.store)
    known = {q["value_id"] for q in up.query} | up.value_ids | down.value_ids
    others = sorted(set(parent_edges.src.tolist()) - known)
    lineage = [
        *({**r, "role": "ancestor"} for r in up.lineage),
        *({**r, "role": "descendant"} for r in down.lineage),
        *({**r, "role": "other parent"} for r in catalog.records(np.array(others, dtype=np.int64))),
    ]
    extra = [
        {"src": s, "dst": d, "op": catalog.op_name(o)}
        for s, d, o in zip(parent_edges.src.tolist(), parent_edges.dst.tolist(), parent_edges.op.tolist(), strict=True)
    ]
    return LineageAnswer(
        query=up.query,
        method=up.method,
        direction=SUBGRAPH,
        lineage=lineage,
        edges=_unique_edges([*up.edges, *down.edges, *extra]),
        stats=_stats(up, down, len(others)),
    )


def _parents_of(store: Queries, values: np.ndarray, method: str, tau: int | None) -> Edges:
    """Every triple whose dst is one of ``values``: through the index (the
    values' connected sets hold their incoming triples), or with ``rq``,
    from the whole triple table that method reads anyway."""
    if len(values) == 0:
        return Edges.empty()
    if method == "rq":
        triples = _whole_table(store.store)
    else:
        index = QueryContext(store.store).index()
        _, csid = index.sets_of(values)
        triples = index.triples_of_sets(sortedints.unique(csid[csid >= 0]))
    keep = np.isin(triples.dst, values)
    return Edges(triples.src[keep], triples.dst[keep], triples.op[keep])


def _unique_edges(edges: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[tuple[int, int, str]] = set()
    out = []
    for e in edges:
        key = (e["src"], e["dst"], e["op"])
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out


def _stats(up: LineageAnswer, down: LineageAnswer, other_parents: int) -> dict[str, Any]:
    stats = {**up.stats}
    for key in ("sets_read", "triples_scanned", "seconds"):
        stats[key] = round(up.stats[key] + down.stats[key], 6)
    stats["subgraph"] = {"ancestors": len(up.lineage), "descendants": len(down.lineage), "other_parents": other_parents}
    return stats
