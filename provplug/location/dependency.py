"""004's ``dependency(D, C1, L, C2, L_S, L_E)`` relation, computed from rates.

For token ``L`` of container ``C1`` and every container ``C2`` in
``cdep*(C1)``: the positions of ``C2`` it depends on. Positions are walked
back one step edge at a time with :meth:`Rates.upstream` — the corrected
start/end propagation of the digest (§4.5):

    start_i = i_c·(⌈start_{i+1}/(i+1)_p⌉ - 1) + 1,   end_i = i_c·⌈end_{i+1}/(i+1)_p⌉

(fixed buffering moves the start back by the buffer, dynamic buffering to 1,
and the ``initial`` tokens of a container — a delay's, a feedback loop's —
shift its positions by their count, as in 004's SimpleDelay formula). The
result of one path is one interval; where several paths reach a container
the result is their union, which can have gaps, so a container may give
several ``dependency`` rows, one per interval (:class:`Positions`).

Containers are visited dependents first (a container is walked back once
every container that reaches it has been), so on a DAG each is walked once.
On a feedback loop the walk goes round until no new position is reached: it
is exact for any rates (on a self-loop with ``x_c = x_p`` it yields 004's
``1 .. x_c·(⌈k/x_p⌉ - 1)``), and its cost grows with the number of windings
the token's history spans, not with the number of tokens.
"""

from __future__ import annotations

import heapq
from typing import NamedTuple

from provplug.errors import LocationError
from provplug.location.positions import EMPTY, Positions
from provplug.location.workflow_model import Workflow


class Dependency(NamedTuple):
    """One row of ``dependency(D, C1, L, C2, L_S, L_E)``."""

    token: object  # D: the caller's name for the token (None when not given)
    container: str  # C1
    position: int  # L
    source: str  # C2
    start: int  # L_S
    end: int  # L_E


def dependency(graph: Workflow, container: str, position: int) -> dict[str, Positions]:
    """The positions of every container that token ``position`` of
    ``container`` depends on (containers it does not depend on are absent)."""
    if isinstance(position, bool) or not isinstance(position, int) or position < 1:
        raise LocationError(f"a position is a positive integer (1-based), not {position!r}")
    graph.cdep_star(container)  # a LocationError for an unknown container
    reached: dict[str, Positions] = {}
    pending: dict[str, Positions] = {container: Positions.span(position, position)}
    queue = [(-graph.reach(container), container)]
    while queue:
        _, name = heapq.heappop(queue)
        todo = pending.pop(name, EMPTY)
        initial = graph.initial[name]
        for hop in graph.hops(name):
            image = Positions.of(span for s, e in todo if (span := hop.rates.upstream(s, e, initial)) is not None)
            new = image - reached.get(hop.source, EMPTY)
            if new:
                reached[hop.source] = reached.get(hop.source, EMPTY) | new
                pending[hop.source] = pending.get(hop.source, EMPTY) | new
                heapq.heappush(queue, (-graph.reach(hop.source), hop.source))
    return reached


def dependency_rows(graph: Workflow, container: str, position: int, token: object = None) -> list[Dependency]:
    """The ``dependency`` rows of one token: one per interval, by source container."""
    found = dependency(graph, container, position)
    return [
        Dependency(token, container, position, source, start, end)
        for source in sorted(found)
        for start, end in found[source]
    ]
