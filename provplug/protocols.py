"""The interfaces plugins implement. Structural (``typing.Protocol``): a plugin
needs no provplug base class, only these attributes and methods."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .capture import ActiveRun
    from .model import StepInfo


@runtime_checkable
class CaptureAdapter(Protocol):
    """Captures the steps of one engine's pipelines."""

    name: str

    def accepts(self, engine: object) -> bool:
        """True if ``engine`` (e.g. a SparkSession) is this adapter's."""
        ...

    def open(self, engine: object, run: ActiveRun) -> AdapterSession:
        """Start capturing one run; ``run`` stages tables, ops and triples."""
        ...


class AdapterSession(Protocol):
    """One adapter's state for one capture run."""

    def source(self, data: Any, name: str) -> Any:
        """Register ``data`` as source table ``name``; return the data to use
        downstream (possibly wrapped so later steps can trace it)."""
        ...

    def run_step(
        self, step: StepInfo, func: Any, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> Any:
        """Run ``func(*args, **kwargs)`` as ``step``, stage its outputs' rows,
        its op and its triples, and return its result as ``func`` would."""
        ...

    def close(self, error: BaseException | None) -> None:
        """The run ends (``error`` is set when it failed): flush or discard."""
        ...


@runtime_checkable
class Store(Protocol):
    """A provenance store (see :mod:`provplug.store` for the built-in one)."""

    uri: str


@runtime_checkable
class QueryMethod(Protocol):
    """A lineage query method selectable with ``--method NAME``."""

    name: str


class WorkflowGraph(Protocol):
    """The table-level dependency graph inferred from the ops."""

    tables: Sequence[str]
    edges: Iterable[tuple[str, str]]
