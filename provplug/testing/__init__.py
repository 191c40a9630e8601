"""provplug.testing: the conformance kit for capture adapters.

An adapter author runs it from the adapter's own test suite (pytest), on a
small pipeline of the adapter's engine (see docs/testing.md):

* :class:`AdapterContract` — the contract tests as a base class: subclass it
  in a test module, give it a pipeline, and inherit every test.
* Contract checks, each usable on its own on any committed store:
  :func:`assert_store_conforms` (ids decode to stored cells, ops and tables
  agree, counts add up), :func:`assert_outputs_match` (stored rows are what
  the pipeline produced), :func:`assert_run_is_atomic` (a failed run commits
  nothing), :func:`assert_registered_through_entry_point` (the adapter is
  found like any plugin, every hook checks), and
  :func:`assert_lineage_matches_oracle` (every query method answers as the
  oracle). Each raises :class:`ContractViolation` (an ``AssertionError``).
* The triple oracle: :class:`TripleOracle` (lineage by breadth-first search
  over triples) and :class:`StoreContents` (a store read back, value ids
  labelled by table, column and row identity), with the helpers that state
  expectations by hand: :func:`keyed`, :func:`content`, :func:`freeze`,
  :func:`expect`, :func:`expect_lineage`.

The kit is engine-neutral: it imports no engine (a test module brings its
own). It needs pytest (the ``test`` extra), for :class:`AdapterContract`'s
fixtures. Nothing in provplug imports it.
"""

from __future__ import annotations

from .checks import (
    ContractViolation,
    assert_lineage_matches_oracle,
    assert_outputs_match,
    assert_registered_through_entry_point,
    assert_run_is_atomic,
    assert_store_conforms,
)
from .contract import AdapterContract, Captured
from .oracle import (
    Label,
    Lineage,
    OracleAnswer,
    RowIdentity,
    StoreContents,
    Triple,
    TripleOracle,
    content,
    expect,
    expect_lineage,
    freeze,
    keyed,
)

__all__ = [
    "AdapterContract",
    "Captured",
    "ContractViolation",
    "Label",
    "Lineage",
    "OracleAnswer",
    "RowIdentity",
    "StoreContents",
    "Triple",
    "TripleOracle",
    "assert_lineage_matches_oracle",
    "assert_outputs_match",
    "assert_registered_through_entry_point",
    "assert_run_is_atomic",
    "assert_store_conforms",
    "content",
    "expect",
    "expect_lineage",
    "freeze",
    "keyed",
]
