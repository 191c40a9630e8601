"""Beam steps declared with rates: one location edge instead of their triples.

A step decorated with ``@provplug.step(..., rates={"production": f})`` whose
body is ONE ``Map``/``MapTuple``/``FlatMap``/``ParDo`` over one stored table
says: every input element emits exactly ``f`` elements (1:1 when ``f`` is
1). With location lineage on (docs/capture-semantics.md) the capture then

* numbers the output by position instead of by content: the ``j``-th element
  (0-based) emitted for input row ``r`` is output row ``r·f + j``. Every Beam
  table's rows are ``0..n-1``, so output rows are ``0..n·f-1`` and output
  position ``k`` comes from input position ``⌈k/f⌉``: rates 1:f;
* checks the declaration with the data, element by element, in the worker
  (:class:`RatedDoFn`): an element emitting other than ``f`` elements fails
  the run with a :class:`~provplug.errors.LocationError` naming the step,
  the input row and the count;
* writes no triple and records one :class:`~provplug.location.LocationEdge`
  with the black box's column map (every output column <- every input
  column, the triples the black-box rule writes), once the run has told the
  tables' columns and rows (:func:`rated_edge`). The triples the black box
  would have written are still counted from the elements' provenance; the
  edge must stand for exactly as many (:func:`check_black_box`), so an
  element missing a cell of a column fails the run too. Never a wrong answer.

Only consumption 1 without buffering fits a ParDo (one element in, its
outputs out); any other declaration is a ``LocationError`` when the step is
called. With location lineage off the declaration is recorded and nothing
else changes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import apache_beam as beam

from provplug import ids
from provplug.errors import LocationError
from provplug.location import LocationEdge, Rates, RowRuns, location_edge
from provplug.location import declared_rates as location_rates

from .elements import all_ids
from .fns import _PASS_THROUGH, TracedDoFn

# The ParDo family a declared step may consist of (``Filter`` drops elements: no fixed rate).
RATED_OPERATIONS = ("Map", "MapTuple", "FlatMap", "FlatMapTuple", "ParDo")
SUPPORTED = (
    "Beam supports consumption 1, production f >= 1 and no buffer (one ParDo declared 1:1 or with a fixed fan-out)"
)


def declared_rates(params: Mapping[str, Any], step: str) -> Rates | None:
    """The rates step ``step`` declares, or None; a LocationError for rates a ParDo cannot have."""
    rates = location_rates(params, step)
    if rates is not None and (rates.consumption != 1 or rates.buffer is not None or rates.dynamic):
        raise LocationError(f"step {step} declares {rates.describe()}; {SUPPORTED}")
    return rates


def not_one_pardo(step: str, found: str) -> LocationError:
    """The error of a declared step whose body is not one ParDo over one table."""
    return LocationError(
        f"step {step} declares rates, so its body must be one {', '.join(RATED_OPERATIONS)} "
        f"over one stored table, with one output; {found}"
    )


class RatedDoFn(TracedDoFn):
    """A black box (:class:`~.fns.TracedDoFn`) whose every element must emit
    exactly ``fan_out`` elements; yields them numbered by position,
    ``(row · fan_out + j, value, ids)``, ready to be stored as a table."""

    def __init__(self, inner: beam.DoFn, fan_out: int, label: str, step: str) -> None:
        super().__init__(inner, False, label)
        self.fan_out, self.step = fan_out, step

    def process(self, element, *args, **kwargs):  # type: ignore[no-untyped-def]  # Beam reads type hints from it
        value, prov = element
        every = all_ids(prov)
        if not every:
            raise LocationError(
                f"step {self.step}: an input element has no cell, so its row is unknown; declare no rates for it"
            )
        row = ids.unpack(every[0])[2]  # a table's element: every cell of one row
        emitted = 0
        for out in self.inner.process(value, *args, **kwargs) or ():
            if isinstance(out, _PASS_THROUGH):
                raise LocationError(f"{self.label}: tagged or timestamped outputs cannot be captured")
            if emitted < self.fan_out:
                yield row * self.fan_out + emitted, out, every
            emitted += 1
        if emitted != self.fan_out:
            raise LocationError(
                f"step {self.step} declares production {self.fan_out}, but its input row {row} "
                f"emitted {emitted} element{'' if emitted == 1 else 's'}"
            )


@dataclasses.dataclass(frozen=True)
class RatedOutput:
    """The output table of a declared step, stored as an edge once the run is over."""

    step: str
    op_id: int
    input_table: int
    output_table: int
    rates: Rates


def rated_edge(rated: RatedOutput, columns: Mapping[int, Sequence[str]], rows: Mapping[int, int]) -> LocationEdge:
    """The black box's edge: every output column <- every input column, output
    row ``r`` from input row ``r // f`` (an aligned edge when ``f`` is 1)."""
    fan_out = rated.rates.production
    inputs, outputs = rows[rated.input_table], rows[rated.output_table]
    if outputs != inputs * fan_out:  # each element was checked to emit f: this cannot happen
        raise LocationError(
            f"internal: step {rated.step} has {inputs} input rows and {outputs} output rows, "
            f"not {fan_out} per input row"
        )
    sources = tuple(range(len(columns[rated.input_table])))
    column_map = {out: sources for out in range(len(columns[rated.output_table]))}
    dst = RowRuns.of([(0, outputs)])
    src = None if fan_out == 1 else RowRuns.of([(0, inputs)])
    return location_edge(rated.op_id, rated.input_table, rated.output_table, column_map, dst, src, rated.rates)


def check_black_box(rated: RatedOutput, edge: LocationEdge, counted: int) -> None:
    """The edge stands for exactly the ``counted`` triples the black box
    would have written: every element has a cell in every column (an
    element missing one has fewer triples than the edge stands for)."""
    if edge.triple_count != counted:
        raise LocationError(
            f"step {rated.step} declares {rated.rates.describe()}, but not every element has a cell in every "
            f"column ({counted:,} triples by its cells, the declaration stands for {edge.triple_count:,}): "
            "declare no rates for it"
        )
