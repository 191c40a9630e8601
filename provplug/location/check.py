"""Checking declared rates against what a step did.

A step that declares rates (``@provplug.step(..., rates=...)``) or that
capture takes for row-aligned stores no triples, so a wrong declaration
would silently give wrong answers. Before its edge is kept, the rows it
observed — which input row each output row came from — must be exactly what
the rates say; otherwise :func:`check_rates` raises a
:class:`~provplug.errors.LocationError` naming the first output row that
disagrees. A wrong declaration is an error, never a wrong answer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from provplug.errors import LocationError
from provplug.location.edges import check_sizes
from provplug.location.rates import Rates
from provplug.location.rows import RowRuns


def check_rates(step: str, rates: Rates, src: RowRuns, dst: RowRuns, observed_src: Any, observed_dst: Any) -> None:
    """Raise unless output row ``observed_dst[i]`` depending on input row
    ``observed_src[i]`` (for every ``i``) is exactly the dependency ``rates``
    give between the positions of ``src`` and of ``dst``."""
    check_sizes(rates, src.size, dst.size, f"step {step}")
    src_rows = np.asarray(observed_src, dtype=np.int64)
    dst_rows = np.asarray(observed_dst, dtype=np.int64)
    if src_rows.shape != dst_rows.shape:
        raise LocationError(f"step {step}: {len(src_rows)} observed input rows for {len(dst_rows)} output rows")
    inputs = _positions(step, "input", src, src_rows)
    outputs = _positions(step, "output", dst, dst_rows)
    order = np.lexsort((inputs, outputs))
    inputs, outputs = inputs[order], outputs[order]
    fresh = np.ones(len(order), dtype=bool)
    fresh[1:] = (np.diff(outputs) != 0) | (np.diff(inputs) != 0)
    inputs, outputs = inputs[fresh], outputs[fresh]
    every = np.arange(1, dst.size + 1, dtype=np.int64)
    low, high = rates.windows((every - 1) // rates.production + 1)  # the window of each output position
    outside = (inputs < low[outputs - 1]) | (inputs > high[outputs - 1])
    counted = np.bincount(outputs - 1, minlength=dst.size) != high - low + 1
    wrong = np.concatenate([outputs[outside] - 1, np.flatnonzero(counted)])
    if wrong.size:
        _contradiction(step, rates, src, dst, int(wrong.min()) + 1, inputs[outputs == wrong.min() + 1])


def _positions(step: str, side: str, runs: RowRuns, rows: np.ndarray) -> np.ndarray:
    try:
        return runs.positions_of(rows)
    except LocationError as exc:
        raise LocationError(f"step {step}: {exc.args[0].replace('the table', f'its {side}')}") from None


def _contradiction(step: str, rates: Rates, src: RowRuns, dst: RowRuns, position: int, seen: np.ndarray) -> None:
    low, high = rates.window((position - 1) // rates.production + 1)
    row = int(dst.rows_at([position])[0])
    observed = ", ".join(str(r) for r in src.rows_at(seen[:5]).tolist()) + (", ..." if len(seen) > 5 else "")
    expected = src.rows_at(np.arange(low, min(high, low + 4) + 1))
    declared = ", ".join(str(r) for r in expected.tolist()) + (", ..." if high - low > 4 else "")
    raise LocationError(
        f"step {step} declares {rates.describe()}, but its output row {row} comes from input rows "
        f"[{observed or 'none'}] where the rates say [{declared}]"
    )
