"""A synchronous-dataflow run, token by token: the oracle of the arithmetic.

:func:`simulate` fires actors over FIFO containers exactly as 004 §2
describes — an actor fires when every input holds its consumption rate's
worth of unread tokens — and records, for every token a firing produces, the
input tokens the firing used: the tokens it consumed, or the contents of its
buffer (a deque of the last ``buffer`` tokens consumed, or every token
consumed so far). No position arithmetic is involved, so the lineage it
yields (:meth:`Run.lineage`, a plain graph traversal) checks
:func:`~provplug.location.dependency.dependency` independently.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from provplug.errors import LocationError
from provplug.location.workflow_model import Actor, Workflow

Token = tuple[str, int]  # (container, 1-based position)


@dataclass
class Run:
    """What a simulated run produced."""

    sizes: dict[str, int]  # tokens per container at the end
    used: dict[Token, frozenset[Token]]  # produced token -> the input tokens its firing used
    firings: dict[str, int] = field(default_factory=dict)

    def lineage(self, token: Token) -> dict[str, set[int]]:
        """Every token ``token`` depends on, directly or not, by container."""
        found: dict[str, set[int]] = {}
        todo = list(self.used.get(token, ()))
        while todo:
            container, position = todo.pop()
            if position not in found.setdefault(container, set()):
                found[container].add(position)
                todo.extend(self.used.get((container, position), ()))
        return found

    def tokens(self) -> list[Token]:
        return [(c, p) for c, n in sorted(self.sizes.items()) for p in range(1, n + 1)]


class _Firing:
    """The state of one actor across its firings: read pointers and buffers."""

    def __init__(self, actor: Actor) -> None:
        self.actor = actor
        self.read = {i.container: 0 for i in actor.inputs}
        self.kept: dict[str, deque[int]] = {
            i.container: deque(maxlen=i.buffer) if i.buffer is not None else deque()
            for i in actor.inputs
            if i.buffer is not None or i.dynamic
        }
        self.count = 0

    def ready(self, sizes: Mapping[str, int]) -> bool:
        return all(sizes[i.container] - self.read[i.container] >= i.rate for i in self.actor.inputs)

    def fire(self, sizes: dict[str, int], used: dict[Token, frozenset[Token]]) -> None:
        uses: list[Token] = []
        for source in self.actor.inputs:
            consumed = range(self.read[source.container] + 1, self.read[source.container] + source.rate + 1)
            self.read[source.container] += source.rate
            buffer = self.kept.get(source.container)
            if buffer is None:
                uses.extend((source.container, p) for p in consumed)
            else:
                buffer.extend(consumed)
                uses.extend((source.container, p) for p in buffer)
        firing_uses = frozenset(uses)
        for target in self.actor.outputs:
            for _ in range(target.rate):
                sizes[target.container] += 1
                used[(target.container, sizes[target.container])] = firing_uses
        self.count += 1


def simulate(graph: Workflow, sources: Mapping[str, int], max_firings: int = 1000) -> Run:
    """Run ``graph`` on ``sources`` (tokens per container no actor writes)
    until no actor can fire, or each has fired ``max_firings`` times (a
    feedback loop may fire without end)."""
    sizes = dict(graph.initial)
    for name, count in sources.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise LocationError(f"container {name!r} cannot be given {count!r} tokens")
        if graph.producer(name) is not None:
            raise LocationError(f"container {name!r} is written by an actor: it cannot be given tokens")
        sizes[name] += count
    actors = [_Firing(a) for a in graph.actors]
    used: dict[Token, frozenset[Token]] = {}
    progress = True
    while progress:
        progress = False
        for state in actors:
            while state.count < max_firings and state.ready(sizes):
                state.fire(sizes, used)
                progress = True
    return Run(sizes, used, {s.actor.name: s.count for s in actors})
