"""``--where``: a SQL predicate on a table's stored rows, evaluated without Spark.

The common SQL predicate forms are translated into a pyarrow compute
expression and pushed into the Parquet scan (no JVM, no extra dependency)::

    comparisons  = == != <> < <= > >=     arithmetic  + - * / %
    AND OR NOT ( )   [NOT] IN (...)   [NOT] BETWEEN a AND b   [NOT] LIKE 'p%'
    IS [NOT] NULL    'text'  42  4.2  TRUE FALSE NULL   "Quoted Column"  `col`

A predicate outside that grammar (a function call, CASE, ...) is handed to
DuckDB when it is installed (an optional extra); otherwise it is a one-line
error naming what is not supported.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import LineageQueryError

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<num>\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+(?:[eE][+-]?\d+)?)
      | (?P<str>'(?:[^']|'')*')
      | (?P<qid>"(?:[^"]|"")*"|`[^`]*`)
      | (?P<op><=|>=|<>|!=|==|=|<|>|\(|\)|,|\+|-|\*|/|%)
      | (?P<word>[A-Za-z_][A-Za-z_0-9]*)
    )""",
    re.VERBOSE,
)
_KEYWORDS = {"AND", "OR", "NOT", "IN", "IS", "NULL", "TRUE", "FALSE", "BETWEEN", "LIKE"}


class UnsupportedPredicate(Exception):
    """The predicate is outside the translated grammar."""


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise UnsupportedPredicate(f"unexpected text at {text[pos:pos + 12]!r}")
        kind = m.lastgroup or ""
        value = m.group(kind)
        if kind == "word" and value.upper() in _KEYWORDS:
            kind, value = "kw", value.upper()
        out.append((kind, value))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str, columns: Sequence[str]) -> None:
        self.toks = _tokens(text)
        self.i = 0
        self.columns = list(columns)

    # -- helpers ---------------------------------------------------------------
    def peek(self, *values: str) -> bool:
        return self.i < len(self.toks) and self.toks[self.i][1] in values and self.toks[self.i][0] in ("kw", "op")

    def take(self, *values: str) -> bool:
        if self.peek(*values):
            self.i += 1
            return True
        return False

    def expect(self, value: str) -> None:
        if not self.take(value):
            got = self.toks[self.i][1] if self.i < len(self.toks) else "end of predicate"
            raise UnsupportedPredicate(f"expected {value!r}, found {got!r}")

    def parse(self) -> pc.Expression:
        if not self.toks:
            raise UnsupportedPredicate("the predicate is empty")
        expr = self.or_()
        if self.i != len(self.toks):
            raise UnsupportedPredicate(f"unexpected {self.toks[self.i][1]!r}")
        return expr

    # -- grammar ---------------------------------------------------------------
    def or_(self) -> pc.Expression:
        expr = self.and_()
        while self.take("OR"):
            expr = expr | self.and_()
        return expr

    def and_(self) -> pc.Expression:
        expr = self.not_()
        while self.take("AND"):
            expr = expr & self.not_()
        return expr

    def not_(self) -> pc.Expression:
        if self.take("NOT"):
            return ~self.not_()
        return self.predicate()

    def predicate(self) -> pc.Expression:
        left = self.sum_()
        if self.take("IS"):
            negate = self.take("NOT")
            self.expect("NULL")
            return ~left.is_null() if negate else left.is_null()
        negate = self.take("NOT")
        if self.take("IN"):
            self.expect("(")
            items = [self.literal_value()]
            while self.take(","):
                items.append(self.literal_value())
            self.expect(")")
            expr = left.isin(items)
        elif self.take("BETWEEN"):
            low = self.sum_()
            self.expect("AND")
            expr = (left >= low) & (left <= self.sum_())
        elif self.take("LIKE"):
            kind, pattern = self.toks[self.i] if self.i < len(self.toks) else ("", "")
            if kind != "str":
                raise UnsupportedPredicate("LIKE needs a quoted pattern")
            self.i += 1
            expr = pc.match_like(left, pattern[1:-1].replace("''", "'"))
        elif negate:
            raise UnsupportedPredicate("NOT must precede IN, BETWEEN or LIKE here")
        else:
            for op, fn in (("=", "__eq__"), ("==", "__eq__"), ("!=", "__ne__"), ("<>", "__ne__"),
                           ("<=", "__le__"), (">=", "__ge__"), ("<", "__lt__"), (">", "__gt__")):
                if self.take(op):
                    return getattr(left, fn)(self.sum_())  # type: ignore[no-any-return]
            return left
        return ~expr if negate else expr

    def sum_(self) -> pc.Expression:
        expr = self.term()
        while self.peek("+", "-"):
            fn = pc.add if self.toks[self.i][1] == "+" else pc.subtract
            self.i += 1
            expr = fn(expr, self.term())
        return expr

    def term(self) -> pc.Expression:
        expr = self.factor()
        while self.peek("*", "/", "%"):
            op = self.toks[self.i][1]
            self.i += 1
            right = self.factor()
            if op == "%":
                raise UnsupportedPredicate("the % operator")
            expr = pc.multiply(expr, right) if op == "*" else pc.divide(expr, right)
        return expr

    def factor(self) -> pc.Expression:
        if self.take("("):
            expr = self.or_()
            self.expect(")")
            return expr
        if self.take("-"):
            return pc.negate(self.factor())
        if self.i >= len(self.toks):
            raise UnsupportedPredicate("the predicate ends too early")
        kind, value = self.toks[self.i]
        if kind in ("word", "qid"):
            self.i += 1
            if self.peek("("):
                raise UnsupportedPredicate(f"function call {value}(...)")
            name = value[1:-1].replace('""', '"') if kind == "qid" else value
            return pc.field(self.column(name))
        return pc.scalar(self.literal_value())

    def literal_value(self) -> Any:
        negative = self.take("-")
        if self.i >= len(self.toks):
            raise UnsupportedPredicate("the predicate ends too early")
        kind, value = self.toks[self.i]
        self.i += 1
        if kind == "num":
            number = float(value) if any(ch in value for ch in ".eE") else int(value)
            return -number if negative else number
        if negative:
            raise UnsupportedPredicate(f"'-' before {value!r}")
        if kind == "str":
            return value[1:-1].replace("''", "'")
        if kind == "kw" and value in ("TRUE", "FALSE"):
            return value == "TRUE"
        if kind == "kw" and value == "NULL":
            return None
        raise UnsupportedPredicate(f"expected a value, found {value!r}")

    def column(self, name: str) -> str:
        if name in self.columns:
            return name
        folded = [c for c in self.columns if c.lower() == name.lower()]  # SQL identifiers fold case
        if len(folded) == 1:
            return folded[0]
        raise LineageQueryError(f"--where names unknown column {name!r} (columns: {', '.join(self.columns)})")


def compile_predicate(text: str, columns: Sequence[str]) -> pc.Expression:
    """The pyarrow expression of ``text`` (raises :class:`UnsupportedPredicate`)."""
    return _Parser(text, columns).parse()


def select_rows(rows: pa.Table, text: str, row_column: str) -> list[int]:
    """Row numbers (``row_column``) of the rows where ``text`` holds."""
    columns = [c for c in rows.column_names if c != row_column]
    try:
        expression = compile_predicate(text, columns)
    except UnsupportedPredicate as why:
        return _select_with_duckdb(rows, text, row_column, str(why))
    try:
        selected = rows.filter(expression)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise LineageQueryError(f"bad --where predicate {text!r}: {' '.join(str(exc).split())}") from exc
    return sorted(int(r) for r in selected.column(row_column).to_pylist())


def _select_with_duckdb(rows: pa.Table, text: str, row_column: str, why: str) -> list[int]:
    try:
        import duckdb
    except ImportError:
        raise LineageQueryError(f"bad --where predicate {text!r}: {why} (install duckdb for full SQL)") from None
    try:
        con = duckdb.connect()
        con.register("provplug_rows", rows)
        result = con.execute(f'SELECT "{row_column}" FROM provplug_rows WHERE {text}').fetchall()  # noqa: S608
    except duckdb.Error as exc:
        raise LineageQueryError(f"bad --where predicate {text!r}: {str(exc).splitlines()[0]}") from exc
    return sorted(int(r[0]) for r in result)
