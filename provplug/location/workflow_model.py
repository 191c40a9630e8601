"""004's workflow model: containers, actors, rated edges, container dependencies.

``W = (V, E)`` with ``V = A + C`` (disjoint): actors read containers through input
edges (a consumption rate, optionally a buffer) and write containers through
output edges (a production rate). Containers are FIFO queues whose contents
are kept: a token is named by its container and its 1-based position.

Refused, because positions would be ill-defined (a :class:`LocationError`):
two actors writing one container (their tokens interleave in an order the
rates do not fix), an actor without inputs (it could fire forever), an actor
reading or writing one container twice, and a feedback loop none of whose
containers holds initial tokens (it deadlocks, 004 footnote 2). A
SimpleDelay (004 Fig. 2b) is the ``initial`` tokens of the container it
feeds; a self-loop (Fig. 2a) is an actor reading and writing one container
that holds ``x_c`` initial tokens.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from provplug.errors import LocationError
from provplug.location.rates import Rates, _positive


@dataclass(frozen=True)
class Consumption:
    """An input edge: the actor reads ``rate`` tokens of ``container`` per firing."""

    container: str
    rate: int = 1
    buffer: int | None = None  # fixed buffering (004's x_s)
    dynamic: bool = False  # dynamic buffering


@dataclass(frozen=True)
class Production:
    """An output edge: the actor appends ``rate`` tokens to ``container`` per firing."""

    container: str
    rate: int = 1


@dataclass(frozen=True)
class Actor:
    name: str
    inputs: tuple[Consumption, ...]
    outputs: tuple[Production, ...]

    @property
    def containers(self) -> list[str]:
        """The containers the actor reads, then those it writes."""
        return [i.container for i in self.inputs] + [o.container for o in self.outputs]

    @property
    def stateful(self) -> bool:
        return any(i.buffer is not None or i.dynamic for i in self.inputs)

    def rates(self, source: Consumption, target: Production) -> Rates:
        """The rates of the edge from input ``source`` to output ``target``."""
        return Rates(source.rate, target.rate, source.buffer, source.dynamic)


@dataclass(frozen=True)
class Hop:
    """One step back from a container: its producer reads ``source`` with ``rates``."""

    actor: str
    source: str
    rates: Rates


@dataclass(frozen=True)
class Workflow:
    """A validated workflow graph (build it with :func:`workflow`)."""

    actors: tuple[Actor, ...]
    initial: Mapping[str, int]  # every container -> its initial tokens (0 for most)
    _producer: Mapping[str, Actor] = field(repr=False, compare=False)
    _closure: Mapping[str, frozenset[str]] = field(repr=False, compare=False)

    @property
    def containers(self) -> tuple[str, ...]:
        return tuple(sorted(self.initial))

    def producer(self, container: str) -> Actor | None:
        self._known(container)
        return self._producer.get(container)

    def hops(self, container: str) -> list[Hop]:
        """The containers ``container`` depends on directly, with the rates of each edge."""
        actor = self.producer(container)
        if actor is None:
            return []
        target = next(o for o in actor.outputs if o.container == container)
        return [Hop(actor.name, source.container, actor.rates(source, target)) for source in actor.inputs]

    def cdep(self) -> set[tuple[str, str]]:
        """``cdep(C1, C2) :- out(P, C1), in(C2, P)``."""
        return {(o.container, i.container) for a in self.actors for o in a.outputs for i in a.inputs}

    def cdep_star(self, container: str) -> frozenset[str]:
        """The containers ``container`` depends on, directly or transitively (``cdep*``)."""
        self._known(container)
        return self._closure[container]

    def reach(self, container: str) -> int:
        """How many containers ``container`` and its ``cdep*`` hold: larger for
        dependents than for what they depend on, equal within a loop."""
        return len(self._closure[container] | {container})

    def _known(self, container: str) -> None:
        if container not in self.initial:
            raise LocationError(f"no container {container!r} in the workflow")


def workflow(actors: Iterable[Actor], initial: Mapping[str, int] | None = None) -> Workflow:
    """Check ``actors`` and the ``initial`` tokens of containers, and build the graph."""
    actors = tuple(actors)
    tokens = {name: 0 for a in actors for name in a.containers}
    for name, count in (initial or {}).items():
        if count != 0:
            _positive(f"the initial tokens of {name!r}", count)
        tokens[name] = int(count)
    producer: dict[str, Actor] = {}
    for actor in actors:
        _check_actor(actor, producer)
    direct: dict[str, set[str]] = {c: set() for c in tokens}
    for actor in actors:
        for target in actor.outputs:
            direct[target.container].update(i.container for i in actor.inputs)
    _check_loops(tokens, direct)
    return Workflow(actors, tokens, producer, {c: _closure(c, direct) for c in tokens})


def _check_actor(actor: Actor, producer: dict[str, Actor]) -> None:
    if not actor.inputs:
        raise LocationError(f"actor {actor.name!r} has no input: it could fire without end")
    for side, names in (
        ("inputs", [i.container for i in actor.inputs]),
        ("outputs", [o.container for o in actor.outputs]),
    ):
        if len(set(names)) != len(names):
            raise LocationError(f"actor {actor.name!r} names a container twice among its {side}")
    for source in actor.inputs:
        Rates(source.rate, 1, source.buffer, source.dynamic)  # validates rate and buffer
    for target in actor.outputs:
        _positive(f"the production rate of {actor.name!r} into {target.container!r}", target.rate)
        if target.container in producer:
            raise LocationError(
                f"container {target.container!r} is written by {producer[target.container].name!r} and "
                f"{actor.name!r}: the order of their tokens is not fixed by rates"
            )
        producer[target.container] = actor


def _closure(start: str, direct: Mapping[str, set[str]]) -> frozenset[str]:
    seen: set[str] = set()
    todo = list(direct[start])
    while todo:
        c = todo.pop()
        if c not in seen:
            seen.add(c)
            todo.extend(direct[c])
    return frozenset(seen)


def _check_loops(initial: Mapping[str, int], direct: Mapping[str, set[str]]) -> None:
    """Refuse a loop through containers that all start empty: it deadlocks."""
    empty = {c: ({s for s in direct[c] if initial[s] == 0} if initial[c] == 0 else set()) for c in direct}
    for container in direct:
        if initial[container] == 0 and container in _closure(container, empty):
            raise LocationError(
                f"container {container!r} is on a feedback loop without initial tokens: it deadlocks "
                "(give a container of the loop initial tokens, as a delay does)"
            )
