"""The static rates of one step edge and the position arithmetic they imply.

An actor fires when its input holds ``consumption`` unread tokens; firing
``f`` (1-based) reads input positions ``(f-1)·c+1 .. f·c`` and appends
``production`` tokens to its output, at positions ``initial + (f-1)·p+1 ..
initial + f·p`` (``initial``: tokens a container holds before any firing,
e.g. a delay's). What a firing *uses* is its window of input positions:

* stateless: the ``c`` tokens it consumed;
* fixed buffering (buffer ``s >= c``): the last ``s`` tokens consumed so far
  (fewer while the buffer fills), 004's ``x_s``;
* dynamic buffering: every token consumed so far.

Every window ends at ``f·c`` and starts no later than the previous window's
end + 1, so the windows of consecutive firings leave no gap: the positions a
run of output positions depends on are one interval, the first firing's
window start to the last firing's window end. That is the digest's
corrected start/end form (§4.5) — start and end propagated separately,
never a width.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from provplug.errors import LocationError


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise LocationError(f"{name} must be a positive integer, not {value!r}")
    return int(value)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Rates:
    """Consumption and production rate of one input → output step edge."""

    consumption: int = 1
    production: int = 1
    buffer: int | None = None  # fixed buffering: a firing uses the last ``buffer`` tokens consumed
    dynamic: bool = False  # dynamic buffering: a firing uses every token consumed so far

    def __post_init__(self) -> None:
        _positive("a consumption rate", self.consumption)
        _positive("a production rate", self.production)
        if self.buffer is not None:
            _positive("a buffer size", self.buffer)
            if self.dynamic:
                raise LocationError("an edge has fixed or dynamic buffering, not both")
            if self.buffer < self.consumption:
                # 004 keeps the buffer at x_s while each firing consumes x_c new tokens: undefined for x_s < x_c.
                raise LocationError(
                    f"a buffer of {self.buffer} tokens is smaller than its consumption rate {self.consumption}"
                )

    @property
    def aligned(self) -> bool:
        """One token in, one token out, nothing kept: position k comes from position k."""
        return self.consumption == self.production == 1 and self.buffer is None and not self.dynamic

    def window(self, firing: int) -> tuple[int, int]:
        """The input positions firing ``firing`` (1-based) uses."""
        end = firing * self.consumption
        if self.dynamic:
            return 1, end
        if self.buffer is not None:
            return max(1, end - self.buffer + 1), end
        return end - self.consumption + 1, end

    def windows(self, firings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`window` of every firing of an int64 array."""
        end = firings * self.consumption
        if self.dynamic:
            return np.ones_like(end), end
        if self.buffer is not None:
            return np.maximum(1, end - self.buffer + 1), end
        return end - self.consumption + 1, end

    def upstream(self, start: int, end: int, initial: int = 0) -> tuple[int, int] | None:
        """The input positions output positions ``start..end`` depend on
        (one interval, see the module docstring); None if all are initial.
        Output position ``k > initial`` is produced by firing ``ceil((k - initial) / p)``."""
        if end <= initial:
            return None
        first = ceil_div(max(start, initial + 1) - initial, self.production)
        last = ceil_div(end - initial, self.production)
        return self.window(first)[0], self.window(last)[1]

    def used(self, firings: int) -> int:
        """How many (firing, input position) uses firings ``1..firings`` make in all."""
        c = self.consumption
        if self.dynamic:
            return c * firings * (firings + 1) // 2
        if self.buffer is None:
            return c * firings
        filling = min(firings, ceil_div(self.buffer, c) - 1)  # firings whose window is shorter than the buffer
        return c * filling * (filling + 1) // 2 + (firings - filling) * self.buffer

    def describe(self) -> str:
        kept = f", buffer {self.buffer}" if self.buffer is not None else ", dynamic buffer" if self.dynamic else ""
        return f"consumption {self.consumption}, production {self.production}{kept}"


RATES_PARAM = "rates"  # the op parameter a step's declared rates are recorded as (provplug.step)


def rates_of(record: Any, what: str = "rates") -> Rates:
    """``record`` (a :class:`Rates` or a mapping of its fields) as rates, or a
    one-line :class:`LocationError` starting with ``what``."""
    if isinstance(record, Rates):
        return record
    if not isinstance(record, Mapping):
        raise LocationError(
            f"{what} are a provplug.location.Rates or a mapping of consumption, production, buffer, "
            f"dynamic, not {record!r}"
        )
    try:
        return Rates(**record)
    except TypeError as exc:
        raise LocationError(f"{what}: {exc}") from None


def declared_rates(params: Mapping[str, Any], step: str) -> Rates | None:
    """The rates step ``step``'s op parameters declare, or None."""
    record = params.get(RATES_PARAM)
    return None if record is None else rates_of(record, f"step {step}: rates")
