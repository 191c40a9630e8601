"""Group joins: an aggregate's provenance deferred to a join after the write.

An aggregate without grouping keys puts every input row in its one group,
so a list of its members would have to fit one row. When (a) no row-merging
node (aggregate, distinct, window) lies above it inside the step, and (b)
its input rows are *stable* — recomputing its rewritten child yields the
same rows with the same row numbers (no limit, sample, nondeterministic
expression, window or aggregate below) — and come from distinct input rows,
its provenance is *deferred* instead (:func:`defer`, at rewrite time): it
emits a marker (``__pgm_<n>``, non-null on the rows it produced) and its
grouping values (``__pgk_<n>_<i>``) that travel to the step output like data.

After the output is materialised, :func:`group_jobs` joins the stored output
rows the aggregate produced (found by the marker) back to the recomputed
child rows on the grouping values (null-safe equality; a global aggregate's
one group holds every input row: a cross join). Each joined (output row,
member row numbers) row goes to :func:`.writer.write_pairs`, which expands it
to triples. Row ids stay those of the single materialisation; (b) makes the
recomputation deterministic. A column mixing deferred and per-row provenance
(or two aggregates' deferred provenance) could not be written by one join,
so such a step is rewritten again without group joins (:mod:`.rewrite`).

Which aggregates defer is set by ``spark.provplug.groupJoins``: ``global``
(those without grouping keys; the default) or ``always`` (every one whose
input can be recomputed exactly: for groups too large to list in one row).
A global aggregate lists its members in its one row instead when its lists
surely fit ``spark.provplug.groupJoins.listBytes`` (default 10 MB, Spark's
broadcast threshold): 8 bytes a member and row-number column, the members
bounded by the stored row counts of the tables below it (a filter or
project keeps at most its input's rows, a join at most the product and
each side's unmatched rows, a union the sum), or when Spark's own size
estimate puts its input at no more. Recomputing a small input costs a
second job, listing it next to nothing (TPC-H q6 at SF 0.1: a second scan
of lineitem, 0.4 s, for 11,000 members of a table of 600,000 rows).
A pandas aggregate UDF always defers when it can (Spark plans it only beside
other pandas aggregate UDFs, so no list can be collected beside it).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from provplug import schema
from provplug.errors import CaptureError

from .rowlineage import Deferred, Members
from .state import HIDDEN_PREFIX, Context, GroupJoin, Node
from .writer import Cell

GROUP_JOINS_CONF = "spark.provplug.groupJoins"
MODES = ("global", "always")
LIST_BYTES_CONF = "spark.provplug.groupJoins.listBytes"
LIST_BYTES = 10 << 20
MEMBER_KEY = "__member_key_"


def mode(spark: SparkSession) -> str:
    """The session's group-join setting (one of MODES)."""
    setting = spark.conf.get(GROUP_JOINS_CONF, "global") or "global"
    if setting not in MODES:
        raise CaptureError(f"{GROUP_JOINS_CONF} must be 'global' or 'always', not {setting!r}")
    return setting


def list_bytes(spark: SparkSession) -> int:
    """The session's bound on a global aggregate's estimated input that lists its members."""
    setting = spark.conf.get(LIST_BYTES_CONF, None)
    if setting is None:
        return LIST_BYTES
    try:
        bound = int(setting)
    except ValueError:
        bound = -1
    if bound < 0:
        raise CaptureError(f"{LIST_BYTES_CONF} must be a whole number of bytes (0 or more), not {setting!r}")
    return bound


# -- at rewrite time ------------------------------------------------------------------
def may_defer(ctx: Context, grouping: Sequence[Any], child: Node, keyed: bool = False) -> bool:
    """Whether an aggregate over ``child`` may defer its provenance to a group
    join (``keyed``: even with grouping keys, whatever the setting)."""
    state = ctx.state
    # Each joined child row is one member: the child has at most one input row per row.
    members = child.members  # None: row lineage is off (a black box child is not injective)
    one_row = members is None or (members.group is None and not members.deferred and len(members.flat) <= 1)
    return (
        state.allow_groups
        and not ctx.merging_above
        and child.stable
        and child.injective
        and not child.hidden
        and one_row
        and all(g.deterministic() for g in grouping)
        and (keyed or state.group_joins == "always" or (not grouping and not _small(child, state.list_bytes)))
    )


def _small(child: Node, list_bytes: int) -> bool:
    """Whether a global aggregate over ``child`` is small enough to list its
    members in its one row: its lists (a row number of 8 bytes per member
    and row-number column, and the members') surely fit ``list_bytes`` by the
    stored row counts of the tables below, or Spark estimates its input at
    no more (last: the estimate is a JVM call)."""
    lists = len(child.rows) + 1
    if child.max_rows is not None and child.max_rows * 8 * lists <= list_bytes:
        return True
    return _estimated_bytes(child) <= list_bytes


def _estimated_bytes(child: Node) -> int:
    """Spark's size estimate of ``child``'s rows (its plan statistics: an
    upper bound where no column statistics say better)."""
    return int(child.plan.stats().sizeInBytes())  # py4j hands the BigInt over as an int


def defer(
    ctx: Context, grouping: Sequence[Any], grouped: Sequence[tuple[int, Sequence[int]]], child: Node
) -> tuple[tuple[str, ...], list[Column], Members | None]:
    """Defer the provenance of the ``grouped`` attributes (expression id, the
    ids of the child attributes it depends on in every member row) and the rows'
    members to a join of the output rows with ``child``'s rows on the
    grouping values; return the hidden columns the aggregate adds, their
    expressions and the aggregate's members."""
    state, jvm = ctx.state, ctx.jvm
    n = len(state.groups)
    keys = tuple(f"{HIDDEN_PREFIX}k_{n}_{i}" for i in range(len(grouping)))
    marker = f"{HIDDEN_PREFIX}m_{n}"
    values = [jvm.column(_unaliased(g)).alias(k) for g, k in zip(grouping, keys, strict=True)]
    member = child.members.flat[0] if child.members is not None and child.members.flat else None
    rows = tuple(dict.fromkeys((*child.rows, *(child.members.columns if child.members is not None else ()))))
    state.groups.append(GroupJoin(marker, keys, jvm.frame(child.plan).select(*values, *rows), (), member))
    # Computed before any is set: a grouping key keeps its input's id.
    deferred = {expr_id: frozenset((n, t) for t in state.terms_of_ids(refs)) for expr_id, refs in grouped}
    state.deferred.update(deferred)
    state.terms.update({expr_id: frozenset() for expr_id in deferred})
    if child.members is None:
        return (*keys, marker), [*values, F.lit(True).alias(marker)], None
    members = Members(deferred=(Deferred(n, False),) if member else (), empty=child.members.empty)
    return (*keys, marker), [*values, F.lit(True).alias(marker)], members


def _unaliased(expr: Any) -> Any:
    return expr.child() if expr.nodeName() == "Alias" else expr


# -- after the output is written ----------------------------------------------------------
def group_jobs(
    stored: DataFrame, groups: Sequence[GroupJoin], flat: Sequence[str] = ()
) -> list[tuple[DataFrame, tuple[Cell, ...], GroupJoin]]:
    """Per group join with output cells or members to write: the frame its
    triples and row-lineage records come from, the cells to expand it by and
    the group. ``stored`` holds the stored output rows' numbers, hidden
    group-join columns and ``flat`` member columns."""
    jobs = []
    for group in groups:
        if group.cells or group.member is not None:
            used = sorted(
                {t.rows for cell in group.cells for t in cell.terms}
                | ({group.member.column} if group.member is not None else set())
            )
            jobs.append((_joined(stored, group, flat).select(schema.ROW_COLUMN, *used, *flat), group.cells, group))
    return jobs


def _joined(stored: DataFrame, group: GroupJoin, flat: Sequence[str]) -> DataFrame:
    """The stored output rows of ``group``'s aggregate joined to its members."""
    out = stored.filter(F.col(group.marker).isNotNull()).select(schema.ROW_COLUMN, *group.keys, *flat)
    renamed = [f"{MEMBER_KEY}{i}" for i in range(len(group.keys))]
    members = group.child.select(
        *[F.col(k).alias(r) for k, r in zip(group.keys, renamed, strict=True)],
        *[c for c in group.child.columns if c not in group.keys],
    )
    if not group.keys:  # a global aggregate: its (at most one) row has every input row
        return out.crossJoin(members)
    condition = functools.reduce(
        Column.__and__, [F.col(k).eqNullSafe(F.col(r)) for k, r in zip(group.keys, renamed, strict=True)]
    )
    return out.join(members, condition)
