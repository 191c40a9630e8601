"""What a run's row lineage means, per op: the rules :mod:`provplug.ingest.rowlineage`
records beside the row-lineage records (pure data; JSON in ``rowrules.json``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from provplug.errors import DamagedStoreError

LINEAGE = "rowlineage"
RULES = "rowrules.json"

ColumnKind = Literal["copy", "aggregate", "computed", "literal"]
Existence = Literal["exact", "always_one_row", "opaque"]
EXISTENCES: tuple[Existence, ...] = ("exact", "always_one_row", "opaque")
# Aggregates what-if recomputes from the members left; others are "computed".
AGGREGATES = frozenset({"count", "count_star", "count_distinct", "sum", "avg", "min", "max"})


@dataclasses.dataclass(frozen=True)
class ColumnRule:
    """How one output column's value follows from the row's members.

    * ``copy``: the value of input cell (``table``, ``column``) of the
      member's row (for a group key: of any member, they agree). A union's
      column copies from a different table per branch: ``table`` and
      ``column`` are None and ``references`` lists one (table, column) per
      table; a member copies from the one of them its rows hold (none: a
      literal branch, the value never changes);
    * ``aggregate``: ``function`` (one of :data:`AGGREGATES`) over the
      (``table``, ``column``) cells of the alive members (``count_star``:
      no column, counts members);
    * ``computed``: any other function of the ``references`` cells of the
      row's members (a UDF, arithmetic, a window): a change there makes the
      value unknown;
    * ``literal``: no input.
    """

    kind: ColumnKind
    table: int | None = None
    column: str | None = None
    function: str | None = None
    references: tuple[tuple[int, str], ...] = ()

    def __post_init__(self) -> None:
        if self.kind == "aggregate" and self.function not in AGGREGATES:
            raise ValueError(f"unknown aggregate {self.function!r} (known: {sorted(AGGREGATES)})")
        per_table = self.kind == "copy" and self.table is None and self.column is None and self.references
        if (
            self.kind in ("copy", "aggregate")
            and self.function != "count_star"
            and not per_table
            and (self.table is None or self.column is None)
        ):
            raise ValueError(f"a {self.kind} column rule needs its input table and column")
        if per_table and len({t for t, _ in self.references}) != len(self.references):
            raise ValueError("a per-table copy names each input table once")

    @property
    def copies(self) -> dict[int, str]:
        """A copy's source column per input table."""
        if self.kind != "copy":
            return {}
        if self.table is not None and self.column is not None:
            return {self.table: self.column}
        return dict(self.references)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        for key in ("table", "column", "function"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.references:
            out["references"] = [list(r) for r in self.references]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ColumnRule:
        return cls(
            data["kind"],
            data.get("table"),
            data.get("column"),
            data.get("function"),
            tuple((int(t), str(c)) for t, c in data.get("references", ())),
        )


@dataclasses.dataclass(frozen=True)
class OpRowRules:
    """What one op's row lineage means (see the module docstring).

    ``existence``: ``exact``: an output row exists while one of its members
    does (:mod:`provplug.ingest.rowlineage`); ``always_one_row``: the op's output is
    one row whatever is deleted (a global aggregate: with no member left its
    counts are 0 and its other aggregates null); ``opaque``: not derivable
    from deletions (``reason`` says why).
    """

    op: int
    out_table: int
    existence: Existence
    columns: Mapping[str, ColumnRule]  # output column name -> rule
    # input table -> its columns that decide whether/where a row exists
    # (filter predicates, join keys, grouping keys, distinct columns)
    deciding: Mapping[int, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    # inputs whose deletions make existence unknown although the op is
    # otherwise exact (a semi join's right side, a window's frame for ranks)
    opaque_inputs: tuple[int, ...] = ()
    reason: str = ""  # why existence is opaque, for the user ("anti join", "limit", "UDF mapInPandas")

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "out_table": self.out_table,
            "existence": self.existence,
            "columns": {name: rule.to_json() for name, rule in self.columns.items()},
            "deciding": {str(t): list(cols) for t, cols in self.deciding.items()},
            "opaque_inputs": list(self.opaque_inputs),
            "reason": self.reason,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OpRowRules:
        existence = data["existence"]
        if existence not in EXISTENCES:
            raise ValueError(f"unknown existence {existence!r}")
        return cls(
            int(data["op"]),
            int(data["out_table"]),
            existence,
            {name: ColumnRule.from_json(rule) for name, rule in data["columns"].items()},
            {int(t): tuple(cols) for t, cols in data.get("deciding", {}).items()},
            tuple(int(t) for t in data.get("opaque_inputs", ())),
            str(data.get("reason", "")),
        )


def rules_text(rules: Iterable[OpRowRules]) -> str:
    return json.dumps([r.to_json() for r in sorted(rules, key=lambda r: (r.op, r.out_table))], indent=1)


def parse_rules(text: str, where: str) -> list[OpRowRules]:
    try:
        return [OpRowRules.from_json(item) for item in json.loads(text)]
    except (ValueError, KeyError, TypeError) as exc:
        raise DamagedStoreError(f"damaged store file {where}: not row-lineage rules ({exc})") from exc
