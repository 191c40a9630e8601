"""Row lineage: why each output row exists, beside the cell triples (docs/capture-semantics.md "Row lineage").

Cell triples say which cells a value was computed from; what-if and
dependency queries also need to know which *input rows* an output row needs,
and how they combine (Lipstick's "·" joint use, "+"/δ alternatives, "⊗"
aggregate members). A run records it in two datasets of its directory:

``rowlineage/`` (Parquet, :data:`provplug.schema.ROW_LINEAGE`): one record per (output row,
member, input row)::

    op, out_table, out_row   the output row (row number of the id layout)
    member                   which member of the row this input row belongs to
    in_table, in_row         one input row of that member
    optional                 the input row comes from the side of an outer join
                             that is padded with nulls when it goes

A *member* is a set of input rows used jointly: one row of each joined input
(inner join: both; a union branch: the one row; a filter or projection: the
row itself). An output row of a row-merging operation (groupBy/agg, distinct,
dropDuplicates) has one member per group member; every other row has exactly
one member (``member = 0``). Under :attr:`OpRowRules.existence` ``"exact"``:

* a member is *alive* while every non-optional input row of it exists;
* the output row exists while at least one member is alive;
* an optional input row that goes leaves the member alive with that side
  null-padded, unless another output row of the op that shares the member's
  non-optional rows is still alive (outer join: a preserved row keeps one
  padded row only when its last match went).

``rowrules.json`` (one JSON list per run, :class:`provplug.rowrules.OpRowRules` per op): how
each output column's value follows from the members (copy of an input cell,
an aggregate over the members' cells, or computed otherwise), which input
columns decide existence (filter predicates, join keys, grouping keys:
a changed cell there makes existence unknown), and ops whose row existence
is not derivable from deletions at all (anti join, except, limit, black
boxes): ``existence = "opaque"``; an op whose output is one row whatever
is deleted (a global aggregate): ``existence = "always_one_row"``, the
row lives on with no member (counts 0, other aggregates null).

Writers: adapters write records with :class:`RowLineageWriter` into
:meth:`provplug.ingest.recorder.StagedRun.row_lineage_destination` and the rules
with :meth:`~provplug.ingest.recorder.StagedRun.record_row_rules`. Readers:
:func:`rules_of` and :func:`lineage_of`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from provplug import schema
from provplug.rowrules import LINEAGE, RULES, OpRowRules, parse_rules

if TYPE_CHECKING:
    import pyarrow.dataset as pads

    from provplug.plugin.protocols import Store


# -- reading a store ---------------------------------------------------------------
def rules_of(store: Store[Any], run_ids: Sequence[str] | None = None) -> dict[int, OpRowRules]:
    """The row rules of the committed runs (or of ``run_ids``), by output
    table id (a table is the output of one op; an op may have several)."""
    from provplug.store import files as storefiles

    out: dict[int, OpRowRules] = {}
    for path in _run_paths(store, RULES, run_ids):
        with storefiles.damage_reported(path):
            text = store.read_text(path)
        for rule in parse_rules(text, path):
            out[rule.out_table] = rule
    return out


def lineage_of(store: Store[Any], run_ids: Sequence[str] | None = None) -> pads.Dataset | None:
    """The row-lineage records of the committed runs (or of ``run_ids``) as one
    lazily read dataset; None when no run recorded any. Scan it inside
    ``storefiles.damage_reported(...)``; filter on ``op``, ``in_table``/``in_row``
    or ``out_table``/``out_row`` to read only what a question needs."""
    import pyarrow.dataset as pads

    files = [f for path in _run_paths(store, LINEAGE, run_ids) for f in _parquet_files(store, path)]
    if not files:
        return None
    return pads.dataset(files, schema=schema.ROW_LINEAGE, format="parquet", filesystem=store.fs)


def _parquet_files(store: Store[Any], folder: str) -> list[str]:
    """The Parquet parts under ``folder`` (writers' ``_``/``.`` temporaries skipped)."""
    import pyarrow.fs as pafs

    infos = store.fs.get_file_info(pafs.FileSelector(folder, recursive=True, allow_not_found=True))
    return sorted(
        i.path
        for i in infos
        if i.type == pafs.FileType.File
        and i.path.endswith(".parquet")
        and not any(part.startswith(("_", ".")) for part in i.path[len(folder) + 1 :].split("/"))
    )


def _run_paths(store: Store[Any], dataset: str, run_ids: Sequence[str] | None) -> list[str]:
    paths = store.run_paths(dataset)
    if run_ids is None:
        return paths
    wanted = {f"/{r}/" for r in run_ids}
    return [p for p in paths if any(w in p.replace("\\", "/") + "/" for w in wanted)]
