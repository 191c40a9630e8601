"""Black-box capture of group and partition functions (``applyInPandas``,
``mapInPandas``): wrappers that run in Spark's Python workers around the
user's function.

docs/capture-semantics.md: a function that receives a group or a partition of whole records
is a black box, each of whose output cells depends on every input cell it
received. The rewrite (:mod:`.rules`) passes the function the row-number
columns of its input beside the data; a wrapper hands the user's function
the data alone and appends to each output row, per row-number column, the
list of row numbers the function had received when it produced the row: the
whole group for ``applyInPandas``, the partition's batches read so far for
``mapInPandas`` (it cannot have used a batch it had not read).

A Python UDTF (:func:`carried_udtf`) is called once per argument row and
may keep state in its instance between calls: an output row depends on the
argument row of the call that yielded it and on every argument row received
since the instance last held the state it was created with at the start of
a call (its attributes, compared pickled): the rows its state may carry.
A stateless UDTF's rows depend on their own argument row alone; a
``terminate`` row on the rows its state gathered.
"""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from collections.abc import Callable, Iterator
from typing import Any, cast

import pandas as pd


@dataclasses.dataclass(frozen=True)
class Carried:
    """The row numbers a wrapper carries past the user's function."""

    rows: tuple[str, ...]  # the input's row-number columns
    scalar: tuple[bool, ...]  # per row column: one row number per row, not an array
    lists: tuple[str, ...]  # per row column: the output column listing the numbers received
    fields: tuple[str, ...]  # the user's output schema's field names


def takes_key(func: Callable[..., Any]) -> bool:
    """Whether a grouped-map function takes (key, pdf), as PySpark decides it."""
    return len(inspect.getfullargspec(func).args) == 2


def _numbers(column: pd.Series, scalar: bool) -> list[int]:
    if scalar:
        return cast(list[int], column.dropna().astype("int64").tolist())
    return [int(n) for numbers in column.dropna() for n in numbers if n is not None]


def _tagged(out: pd.DataFrame, carried: Carried, received: dict[str, list[int]]) -> pd.DataFrame:
    if len(out.columns) == 0 and len(out) == 0:  # "no rows" without columns, as PySpark allows
        out = pd.DataFrame({field: pd.Series([], dtype=object) for field in carried.fields})
    elif not all(isinstance(c, str) for c in out.columns):  # matched by position: name them so ours match by name
        out = out.set_axis(list(carried.fields[: len(out.columns)]), axis=1)
    # Object series, explicitly: an empty list would become a float column Arrow cannot make lists of.
    return out.assign(
        **{
            name: pd.Series([received[rows]] * len(out), index=out.index, dtype=object)
            for rows, name in zip(carried.rows, carried.lists, strict=True)
        }
    )


def group_function(
    func: Callable[..., pd.DataFrame], with_key: bool, carried: Carried, key: Any, pdf: pd.DataFrame
) -> pd.DataFrame:
    """applyInPandas body: every output row of a group received the whole group."""
    received = {rows: _numbers(pdf[rows], scalar) for rows, scalar in zip(carried.rows, carried.scalar, strict=True)}
    data = pdf.drop(columns=list(carried.rows))
    return _tagged(func(key, data) if with_key else func(data), carried, received)


def partition_function(
    func: Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]], carried: Carried, batches: Iterator[pd.DataFrame]
) -> Iterator[pd.DataFrame]:
    """mapInPandas body: an output batch received every batch read before it."""
    received: dict[str, list[int]] = {rows: [] for rows in carried.rows}

    def data() -> Iterator[pd.DataFrame]:
        for pdf in batches:
            for rows, scalar in zip(carried.rows, carried.scalar, strict=True):
                received[rows] += _numbers(pdf[rows], scalar)
            yield pdf.drop(columns=list(carried.rows))

    for out in func(data()):
        yield _tagged(out, carried, {rows: list(numbers) for rows, numbers in received.items()})


def _state(instance: Any) -> bytes | None:
    """The instance's attributes, pickled (None: they cannot be compared)."""
    try:
        return pickle.dumps(vars(instance))
    except Exception:  # __slots__, or state pickle cannot hold: treated as changed
        return None


def _received(value: Any, scalar: bool) -> list[int]:
    if value is None:
        return []
    return [int(value)] if scalar else [int(n) for n in value if n is not None]


def carried_udtf(handler: type, scalar: tuple[bool, ...]) -> type:
    """A UDTF class that runs ``handler`` (the user's UDTF class) on all but
    its last ``len(scalar)`` arguments, the row numbers of the argument row
    (per row-number column: one number, or a list when not ``scalar``), and
    appends to each output row, per row-number column, the list of row
    numbers the row depends on (see the module's docstring)."""
    count = len(scalar)

    class CarriedUDTF:
        def __init__(self) -> None:
            self._udtf = handler()
            self._initial = _state(self._udtf)
            # The argument rows received since the instance last held its
            # initial state at the start of a call: all its state can carry.
            self._since: list[list[int]] = [[] for _ in scalar]

        def _carried(self) -> list[list[int]]:
            """The rows the instance's state may carry (none when it is the initial one)."""
            now = _state(self._udtf)
            if now is not None and now == self._initial:
                self._since = [[] for _ in scalar]
            return self._since

        def eval(self, *args: Any, **kwargs: Any) -> Iterator[tuple[Any, ...]]:
            data, numbers = args[:-count], args[-count:]
            since = self._carried()
            for seen, value, one in zip(since, numbers, scalar, strict=True):
                seen += _received(value, one)
            yield from _tagged_rows(self._udtf.eval(*data, **kwargs), [list(seen) for seen in since])

        def terminate(self) -> Iterator[tuple[Any, ...]]:
            finish = getattr(self._udtf, "terminate", None)
            if finish is None:
                return
            yield from _tagged_rows(finish(), [list(seen) for seen in self._carried()])

        def cleanup(self) -> None:
            if hasattr(self._udtf, "cleanup"):
                self._udtf.cleanup()

    CarriedUDTF.__name__ = CarriedUDTF.__qualname__ = f"Carried{handler.__name__}"
    return CarriedUDTF


def _tagged_rows(rows: Any, lists: list[list[int]]) -> Iterator[tuple[Any, ...]]:
    """The user's output rows (tuples, lists or Rows; None: no rows), each
    followed by ``lists``."""
    if rows is None:
        return
    for row in rows:
        yield (*tuple(row), *lists)
