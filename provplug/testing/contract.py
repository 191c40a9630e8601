""":class:`AdapterContract`: the contract tests, as a base class to subclass.

An adapter's test module subclasses it once, under a name pytest collects
(``class TestMyAdapterContract(AdapterContract)``), says which adapter it
tests, provides one fixture and three methods, and inherits every test:

* fixture ``new_engine`` (class scope or wider; in the class, a
  ``@classmethod`` under ``@pytest.fixture(scope="class")``): a
  zero-argument callable returning a fresh engine object for
  :func:`provplug.capture` (a ``SparkSession``, a new ``beam.Pipeline()``,
  ...); it is called once per capture,
* :meth:`AdapterContract.pipeline` — build a small pipeline inside an open
  capture and return its step outputs by table name,
* :meth:`AdapterContract.produced` — after the run, the rows those outputs
  hold, read by the engine's own means,
* :meth:`AdapterContract.failing_pipeline` — build a pipeline one of whose
  steps raises.

The pipeline is captured once per class (fixture ``captured``), into a fresh
store, with plugins loaded anew (so an entry point installed by the test
module is seen).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

import provplug
from provplug.plugin.manager import Plugins

from .checks import (
    assert_lineage_matches_oracle,
    assert_outputs_match,
    assert_registered_through_entry_point,
    assert_run_is_atomic,
    assert_store_conforms,
)
from .oracle import StoreContents

EngineFactory = Callable[[], object]


@dataclass(frozen=True)
class Captured:
    """One committed capture of :meth:`AdapterContract.pipeline`: its store,
    the outputs the pipeline returned, and the rows they held (by table name)."""

    store: Path
    outputs: Mapping[str, Any]
    produced: Mapping[str, list[dict[str, Any]]]


class AdapterContract:
    """The tests every capture adapter must pass (see the module docstring).

    Class attributes a subclass sets:

    * ``adapter_name`` — the name the adapter registers (required),
    * ``dense_rows`` — True when the adapter numbers every table's rows
      ``0 .. rows-1`` (default False: only distinct row numbers are required),
    * ``capture_options`` — keyword arguments for :func:`provplug.capture`,
    * ``failure`` — the exception :meth:`failing_pipeline` raises (default ``Exception``).
    """

    adapter_name: ClassVar[str]
    dense_rows: ClassVar[bool] = False
    capture_options: ClassVar[Mapping[str, Any]] = {}
    failure: ClassVar[type[BaseException]] = Exception

    # -- what the adapter's test module provides ---------------------------------------------
    def pipeline(self, run: Any) -> Mapping[str, Any]:
        """Build a small pipeline in the open capture ``run`` (``run.source``,
        then steps); return its step outputs by output table name."""
        raise NotImplementedError(f"{type(self).__name__} must define pipeline(run)")

    def produced(self, outputs: Mapping[str, Any]) -> Mapping[str, Iterable[Mapping[str, Any]]]:
        """After the run, the rows each output of :meth:`pipeline` holds (by table
        name), read by the engine's own means, as dicts of column -> value."""
        raise NotImplementedError(f"{type(self).__name__} must define produced(outputs)")

    def failing_pipeline(self, run: Any) -> None:
        """Build, in the open capture ``run``, a pipeline whose step raises ``failure``."""
        raise NotImplementedError(f"{type(self).__name__} must define failing_pipeline(run)")

    # -- running it ----------------------------------------------------------------------------
    def capture(self, engine: object, store: Path, build: Callable[[Any], Any]) -> Any:
        """Run ``build(run)`` in a capture of ``engine`` into ``store`` (plugins loaded anew)."""
        with provplug.capture(engine, store=store, plugins=Plugins.load(), **self.capture_options) as run:
            return build(run)

    @pytest.fixture(scope="class")
    @classmethod
    def captured(cls, new_engine: EngineFactory, tmp_path_factory: pytest.TempPathFactory) -> Captured:
        """The pipeline captured once for the class, into a fresh store."""
        contract = cls()
        store = tmp_path_factory.mktemp("contract") / "contract.prov"
        outputs = contract.capture(new_engine(), store, contract.pipeline)
        produced = {name: [dict(r) for r in rows] for name, rows in contract.produced(outputs).items()}
        return Captured(store, outputs, produced)

    # -- the contract --------------------------------------------------------------------------
    def test_adapter_registers_through_the_entry_point_group(self) -> None:
        adapter = assert_registered_through_entry_point(self.adapter_name)
        assert adapter.name == self.adapter_name

    def test_store_conforms(self, captured: Captured) -> None:
        got = assert_store_conforms(captured.store, dense_rows=self.dense_rows)
        assert got.triples, "the contract pipeline must record triples"

    def test_one_run_conforms_by_its_id(self, captured: Captured) -> None:
        (run,) = provplug.open_store(captured.store).runs()
        assert_store_conforms(captured.store, run=run["run_id"], dense_rows=self.dense_rows)

    def test_stored_outputs_are_what_the_pipeline_produced(self, captured: Captured) -> None:
        assert set(captured.produced) == set(captured.outputs), "produced() must give rows for every output"
        assert_outputs_match(captured.store, captured.produced)

    def test_every_step_output_is_a_table(self, captured: Captured) -> None:
        got = StoreContents(captured.store)
        written = {got.by_id[t]["name"] for op in got.ops_by_id.values() for t in op["outputs"]}
        assert set(captured.outputs) <= written

    def test_lineage_answers_match_the_oracle(self, captured: Captured) -> None:
        assert_lineage_matches_oracle(captured.store)

    def test_failed_run_leaves_no_store(self, new_engine: EngineFactory, tmp_path: Path) -> None:
        store = tmp_path / "failed.prov"
        raised = assert_run_is_atomic(
            store, lambda: self.capture(new_engine(), store, self.failing_pipeline), self.failure
        )
        assert isinstance(raised, self.failure)

    def test_failed_run_leaves_earlier_runs_as_they_were(self, new_engine: EngineFactory, tmp_path: Path) -> None:
        store = tmp_path / "two.prov"
        self.capture(new_engine(), store, self.pipeline)
        assert_run_is_atomic(store, lambda: self.capture(new_engine(), store, self.failing_pipeline), self.failure)
        assert_store_conforms(store, dense_rows=self.dense_rows)
