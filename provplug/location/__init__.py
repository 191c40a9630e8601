"""Location-based lineage (004; docs/capture-semantics.md): lineage from positions and static rates.

A step whose rates are static — every row-aligned Spark step (select,
withColumn, cast, scalar UDF: one row in, one row out), a Beam ParDo declared
1:1 or with a fixed fan-out, any step declared with ``rates=`` — needs no
stored triple per cell: "output row k comes from the input rows of the
firing that produced it, output column c from these input columns" is stored
once per step and the triples are computed when they are read.

The parts:

* :mod:`.workflow_model` — 004's workflow: containers, actors (stateless, fixed or
  dynamic buffering), rated edges, ``cdep`` and ``cdep*``; delays and
  self-loops through containers' initial tokens;
* :mod:`.rates` — the arithmetic of one edge (firing of a position, window
  of a firing, the corrected start/end propagation of the digest §4.5);
* :mod:`.dependency` — ``dependency(D, C1, L, C2, L_S, L_E)`` for every
  container in ``cdep*(C1)``, exact on DAGs (unions of paths as
  :class:`Positions`, one row per interval) and on feedback loops;
* :mod:`.simulate` — an SDF run token by token, the oracle of the tests;
* :mod:`.rows`, :mod:`.edges` — provplug's side: :class:`RowRuns` maps a
  table's positions to its sparse row numbers (two integers per partition),
  a :class:`LocationEdge` is one (op, input table, output table) with its
  rates and column map, and :func:`expand` yields exactly the triples it
  stands for, as Arrow batches of the store's triple schema;
* :mod:`.files` — ``locations.json`` in a run's directory;
  :func:`locations_of` reads every committed run's edges;
* :mod:`.check` — :func:`check_rates`: a declaration the data contradicts
  is a :class:`~provplug.errors.LocationError`;
* :mod:`.read` — THE way every reader reads a store's triples: the stored
  files plus the edges expanded (:func:`triple_batches`, :func:`triple_table`,
  :func:`triple_counts`, and on Spark :func:`triples_frame`, expanded on the
  executors), with a :class:`TripleFilter` pushed down to both.

How the rest of provplug uses it:

* **Capture.** A Spark step the capture recognises as row-aligned numbers
  its output rows with the input's row numbers (same partitioning, same
  order), writes no triples and records one aligned edge per input (its
  column map from the projection's references, the output's runs from the
  partition sizes). A step declared with rates has its captured
  triples checked on Spark against the edge (each one of the edge's by
  position arithmetic, each once, as many as the edge stands for) before
  its edge replaces them (``provplug_spark.declared``). Beam: a step declared 1:1 or with a fixed
  fan-out whose body is one ParDo numbers its output by position (input row
  r's j-th element is row r·f + j), checks each element's fan-out in the
  worker and records an edge with the black box's column map
  (:mod:`provplug_beam.rated`). The recorder writes the run's edges
  once, as ``locations.json``, when the run finishes (a dataset of the run,
  so it is committed and deleted with it). ``location_lineage=False`` keeps
  storing triples, so the two stores can be compared.
* **Index and queries.** Every reader of triples (the local and Spark
  index engines, RQ on the driver and on Spark, the exports and column
  lineage, the workflow graph, browse, metrics; CCProv, CSProv, downstream
  and diff through the index and the queries) reads them through
  :mod:`.read`: the stored triple files plus :func:`expand` of
  :func:`locations_of` — the same triples, so components, sets and answers
  are identical to those of a store that kept them. The importer's cycle
  check reads imported triples only (edges hold captured ids only). A
  manifest counts ``triples`` (stored) and, for a run with edges,
  ``location_edges`` and ``location_triples`` (those they stand for);
  ``provplug stats`` and ``provplug runs`` show both. Static-rate hops can
  later be answered arithmetically (:func:`dependency`) instead of expanded.
"""

from __future__ import annotations

from provplug.location.check import check_rates
from provplug.location.dependency import Dependency, dependency, dependency_rows
from provplug.location.edges import LocationEdge, expand, expand_positions, location_edge, workflow_of
from provplug.location.positions import Positions
from provplug.location.rates import RATES_PARAM, Rates, declared_rates, rates_of
from provplug.location.rows import RowRuns
from provplug.location.simulate import Run, simulate
from provplug.location.workflow_model import Actor, Consumption, Production, Workflow, workflow

__all__ = [
    "RATES_PARAM",
    "Actor",
    "Consumption",
    "Dependency",
    "LocationEdge",
    "Positions",
    "Production",
    "Rates",
    "RowRuns",
    "Run",
    "Workflow",
    "check_rates",
    "declared_rates",
    "dependency",
    "dependency_rows",
    "expand",
    "expand_positions",
    "location_edge",
    "rates_of",
    "simulate",
    "workflow",
    "workflow_of",
]
