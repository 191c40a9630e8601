"""The user's own write, replayed on the stored rows (one execution).

A captured write stores the written DataFrame's rows first (the step's one
writer job); the user's files are then written FROM those stored rows, so
the two cannot differ, even when the plan is nondeterministic
(``monotonically_increasing_id``, unseeded ``rand``, ``uuid``, ...).

To write the stored rows as the user asked, the configuration the script
gave its writer is recorded as it is given: while writes are intercepted,
the configuration methods of ``DataFrameWriter`` (``mode``, ``format``,
``option``, ``options``, ``partitionBy``, ``bucketBy``, ``sortBy``,
``clusterBy``) and ``DataFrameWriterV2`` (``using``, ``option``,
``options``, ``tableProperty``, ``partitionedBy``, ``clusterBy``) note each
call on the writer object before doing it. The replay makes a new writer on
the stored rows (``frame.write`` or ``frame.writeTo(table)``), makes the
same calls in the same order, and ends with the user's terminal method and
its own arguments (``parquet(path, mode=..., partitionBy=...,
compression=...)``, ``saveAsTable``, ``insertInto``, ``jdbc``,
``createOrReplace``, ...).

Recording the public calls was chosen over reading DataFrameWriter's
private JVM fields (``source``, ``mode``, ``extraOptions``,
``partitioningColumns``, ``bucketColumnNames``, ...) by reflection: the
calls are PySpark's documented API, replayed through the same methods (so
Spark validates them as it did for the user), while the private fields'
names and types change between Spark versions. Its one blind spot is a
writer made before writes were intercepted: it has no record, and its write
is done as the user's own and recorded as an uncaptured write.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.readwriter import DataFrameWriter, DataFrameWriterV2

CALLS = "_provplug_calls"  # where a writer keeps the configuration calls made on it
V2_TABLE = "_provplug_table"  # where a V2 writer keeps the table it writes
CONFIGURATION: dict[type, tuple[str, ...]] = {
    DataFrameWriter: ("mode", "format", "option", "options", "partitionBy", "bucketBy", "sortBy", "clusterBy"),
    DataFrameWriterV2: ("using", "option", "options", "tableProperty", "partitionedBy", "clusterBy"),
}


@dataclasses.dataclass(frozen=True)
class Call:
    """One configuration call made on a writer."""

    method: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class Written:
    """What a write writes: ``target`` (a path, or a table when ``is_table``)
    names its table; ``dataset`` is recorded (the step's ``dataset``
    parameter, an uncaptured write's name); ``linked``: a later read of it
    in the run is a read of this write's output (files and catalog tables);
    ``identity``: the dataset as OpenLineage names it, when Spark's catalog
    and paths cannot say (a JDBC table: the URL and the table)."""

    target: str | None
    is_table: bool
    dataset: str
    linked: bool = True
    identity: tuple[str, str] | None = None  # (namespace, name) of a dataset Spark's catalog does not name


def recording_replacements() -> Iterator[tuple[type, str, Any]]:
    """(class, method, replacement): the writers' constructors start an
    empty record, their configuration methods add to it."""
    yield DataFrameWriter, "__init__", _starting_record(DataFrameWriter.__dict__["__init__"])
    yield DataFrameWriterV2, "__init__", _starting_v2_record(DataFrameWriterV2.__dict__["__init__"])
    for cls, methods in CONFIGURATION.items():
        for method in methods:
            yield cls, method, _recorded(cls.__dict__[method], method)


def _starting_record(original: Callable[..., Any]) -> Any:
    @functools.wraps(original)
    def init(self: Any, df: DataFrame) -> None:
        original(self, df)
        setattr(self, CALLS, [])

    return init


def _starting_v2_record(original: Callable[..., Any]) -> Any:
    @functools.wraps(original)
    def init(self: Any, df: DataFrame, table: str) -> None:
        original(self, df, table)
        setattr(self, CALLS, [])
        setattr(self, V2_TABLE, table)

    return init


def _recorded(original: Callable[..., Any], method: str) -> Any:
    @functools.wraps(original)
    def configure(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)  # Spark checks the call first: a rejected one is not replayed
        calls = getattr(self, CALLS, None)
        if calls is not None:
            calls.append(Call(method, args, dict(kwargs)))
        return result

    return configure


def recorded_mode(writer: Any, arguments: Mapping[str, Any]) -> str | None:
    """The save mode of a DataFrameWriter's write, lower-cased: the
    terminal's ``mode`` argument, else the last ``mode()`` call, else
    Spark's default; None when the writer has no record."""
    calls: list[Call] | None = getattr(writer, CALLS, None)
    if calls is None:
        return None
    mode = "errorifexists"
    for call in calls:
        if call.method == "mode" and len(call.args) == 1 and not call.kwargs:
            mode = str(call.args[0] or "errorifexists").lower()
    return str(arguments["mode"]).lower() if arguments.get("mode") else mode


def replaying(writer: Any, terminal: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    """A function writing another DataFrame as ``writer`` was about to write
    its own: same configuration, then ``terminal(*args, **kwargs)``; None
    when the writer was made before its configuration could be recorded."""
    calls: list[Call] | None = getattr(writer, CALLS, None)
    if calls is None:
        return None
    recorded = tuple(calls)

    def write(frame: DataFrame) -> Any:
        if isinstance(writer, DataFrameWriterV2):
            replay: Any = frame.writeTo(getattr(writer, V2_TABLE))
        else:
            replay = frame.write
        for call in recorded:
            getattr(replay, call.method)(*call.args, **call.kwargs)
        return terminal(replay, *args, **kwargs)

    return write
