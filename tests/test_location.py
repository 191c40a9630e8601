"""004's model and dependency relation: the paper's cases by hand, the
digest's counter-example, loops, and a property test against SDF runs.

Every expectation is either derived by hand in the comments (the paper's
figures) or taken from :func:`provplug.location.simulate`, which fires
actors token by token over FIFO queues and records each firing's input
tokens: it knows no position arithmetic, so it checks the formulas.
"""

from __future__ import annotations

import random

import pytest

from provplug.errors import LocationError
from provplug.location import (
    Actor,
    Consumption,
    Dependency,
    Production,
    Workflow,
    dependency,
    dependency_rows,
    simulate,
    workflow,
)


def actor(name: str, reads: dict[str, int], writes: dict[str, int], **buffers: int | str) -> Actor:
    """An actor; ``buffers[container]`` is a fixed buffer size or ``"dynamic"``."""
    inputs = tuple(
        Consumption(c, rate, buffer=b if isinstance(b := buffers.get(c), int) else None, dynamic=b == "dynamic")
        for c, rate in reads.items()
    )
    return Actor(name, inputs, tuple(Production(c, rate) for c, rate in writes.items()))


def as_sets(found: dict[str, object]) -> dict[str, set[int]]:
    return {c: p.to_set() for c, p in found.items()}  # type: ignore[attr-defined]


def agrees_with_simulation(graph: Workflow, sources: dict[str, int], max_firings: int = 60) -> int:
    """Assert dependency == the simulated lineage for every produced token; return how many."""
    run = simulate(graph, sources, max_firings)
    checked = 0
    for container, position in run.tokens():
        expected = run.lineage((container, position))
        found = dependency(graph, container, position)
        assert as_sets(found) == expected, (container, position)
        assert set(found) <= graph.cdep_star(container)
        checked += 1
    return checked


def fig1(u_c: int, v_p: int, v_c: int, x_p: int) -> Workflow:
    """004 Fig. 1's chain U -A-> V -B-> X, stateless."""
    return workflow([actor("A", {"U": u_c}, {"V": v_p}), actor("B", {"V": v_c}, {"X": x_p})])


def paper_width_chain(u_c: int, v_p: int, v_c: int, x_p: int, k: int) -> tuple[int, int]:
    """004's own chain formulas (end and width), for U of x[k]: what it claims."""
    end_v, width_v = v_c * -(-k // x_p), v_c
    end_u, width_u = u_c * -(-end_v // v_p), u_c * -(-width_v // v_p)
    return end_u - width_u + 1, end_u


# -- the paper's cases -------------------------------------------------------------


def test_the_papers_worked_example() -> None:
    # x_p = 2, v_c = 3: x[3] is B's 2nd firing, which read v[4..6];
    # v_p = 2, u_c = 2: v[4] is A's 2nd firing (u[3..4]), v[5], v[6] its 3rd (u[5..6]).
    graph = fig1(u_c=2, v_p=2, v_c=3, x_p=2)
    assert dependency_rows(graph, "X", 3, token="id") == [
        Dependency("id", "X", 3, "U", 3, 6),
        Dependency("id", "X", 3, "V", 4, 6),
    ]
    assert paper_width_chain(2, 2, 3, 2, 3) == (3, 6)  # the paper's formula agrees here
    assert agrees_with_simulation(graph, {"U": 24}) > 0


def test_the_digests_counter_example_to_the_width_formula() -> None:
    # u_c = 1, v_p = 3, v_c = 2, x_p = 1: x[2] is B's 2nd firing, which read v[3..4];
    # v[3] came from A's 1st firing (u[1]), v[4] from its 2nd (u[2]).
    graph = fig1(u_c=1, v_p=3, v_c=2, x_p=1)
    assert dependency_rows(graph, "X", 2) == [
        Dependency(None, "X", 2, "U", 1, 2),
        Dependency(None, "X", 2, "V", 3, 4),
    ]
    assert paper_width_chain(1, 3, 2, 1, 2) == (2, 2)  # 004's width recursion: u[2] alone, too few
    assert simulate(graph, {"U": 6}).lineage(("X", 2)) == {"V": {3, 4}, "U": {1, 2}}
    agrees_with_simulation(graph, {"U": 12})


def test_the_feedback_loop_formula() -> None:
    # Fig. 2a: A reads and writes X, x_c = x_p = 2, x_c tokens pre-loaded.
    # x[5] comes from A's 2nd firing (x[3..4]), x[3..4] from its 1st (x[1..2]).
    graph = workflow([actor("A", {"X": 2}, {"X": 2})], initial={"X": 2})
    assert dependency_rows(graph, "X", 5) == [Dependency(None, "X", 5, "X", 1, 4)]
    for k in range(1, 30):  # 004: end = x_c * (ceil(k / x_p) - 1) if k > x_p else 0, start = 1
        end = 2 * (-(-k // 2) - 1) if k > 2 else 0
        assert as_sets(dependency(graph, "X", k)) == ({"X": set(range(1, end + 1))} if end else {})
    assert agrees_with_simulation(graph, {}, max_firings=20) == 42


def test_a_self_loop_with_other_rates_is_exact_where_the_formula_assumes_equal_rates() -> None:
    # x_c = 1, x_p = 3, one token pre-loaded: firing f reads x[f] and writes x[3f-1..3f+1].
    # x[8] comes from the 3rd firing (x[3]); x[3] from the 1st (x[1]): x[2] is not in it,
    # so the answer has a gap (two rows), where start = 1 would claim x[1..3].
    graph = workflow([actor("A", {"X": 1}, {"X": 3})], initial={"X": 1})
    assert dependency_rows(graph, "X", 8) == [Dependency(None, "X", 8, "X", 1, 1), Dependency(None, "X", 8, "X", 3, 3)]
    agrees_with_simulation(graph, {}, max_firings=15)


def simple_delay_loop(w_c: int, x_p: int, x_c: int, v_p: int, v_c: int, w_p: int, n: int) -> Workflow:
    """Fig. 2b's shape: W -A-> X -B-> V -DL-> W, the delay's n tokens pre-loaded in W."""
    return workflow(
        [actor("A", {"W": w_c}, {"X": x_p}), actor("B", {"X": x_c}, {"V": v_p}), actor("DL", {"V": v_c}, {"W": w_p})],
        initial={"W": n},
    )


def test_the_simple_delay_loop() -> None:
    # Single rate 2, n = 3 (2*w_c > n >= w_c). x[5] is A's 3rd firing: w[5..6]; w[5..6]
    # are DL's 1st firing (n = 3 before them... w[4..5] is DL's 1st, w[6..7] its 2nd).
    graph = simple_delay_loop(2, 2, 2, 2, 2, 2, n=3)
    # 004's end: end_w(x[5]) = 2 * ceil(5/2) = 6; end_v = 2 * ceil((6 - 3) / 2) = 4;
    # end_x = 2 * ceil(4 / 2) = 4; width = end, start = 1.
    assert as_sets(dependency(graph, "X", 5)) == {"W": set(range(1, 7)), "V": set(range(1, 5)), "X": set(range(1, 5))}
    agrees_with_simulation(graph, {}, max_firings=20)


def test_a_multi_rate_delay_loop_has_gaps_that_start_1_would_fill() -> None:
    # w_c=2, x_p=2, x_c=1, v_p=2, v_c=3, w_p=2, n=3. v[7] is B's 4th firing: x[4];
    # x[4] is A's 2nd firing: w[3..4]; w[3] is initial, w[4] is DL's 1st firing: v[1..3];
    # v[1..2] is B's 1st firing (x[1]), v[3] its 2nd (x[2]); x[1..2] is A's 1st: w[1..2].
    graph = simple_delay_loop(2, 2, 1, 2, 3, 2, n=3)
    assert as_sets(dependency(graph, "V", 7)) == {"X": {1, 2, 4}, "W": {1, 2, 3, 4}, "V": {1, 2, 3}}
    agrees_with_simulation(graph, {}, max_firings=20)


# -- buffering -----------------------------------------------------------------------


def test_fixed_buffering_widens_the_start_by_the_buffer() -> None:
    # x_c = 2, buffer 5, y_p = 1: firing f uses the last 5 tokens read, x[max(1, 2f-4)..2f].
    graph = workflow([actor("A", {"X": 2}, {"Y": 1}, X=5)])
    assert [as_sets(dependency(graph, "Y", k))["X"] for k in (1, 2, 3, 4)] == [
        {1, 2},
        {1, 2, 3, 4},
        {2, 3, 4, 5, 6},
        {4, 5, 6, 7, 8},
    ]
    # Through a stateless hop after it: z[2] (z_p = 2, y_c = 3) is B's 1st firing: y[1..3] -> x[1..6].
    chain = workflow([actor("A", {"X": 2}, {"Y": 1}, X=5), actor("B", {"Y": 3}, {"Z": 2})])
    assert as_sets(dependency(chain, "Z", 2)) == {"Y": {1, 2, 3}, "X": set(range(1, 7))}
    assert as_sets(dependency(chain, "Z", 3)) == {"Y": {4, 5, 6}, "X": set(range(4, 13))}
    agrees_with_simulation(chain, {"X": 40})


def test_dynamic_buffering_uses_every_token_read_so_far() -> None:
    graph = workflow([actor("A", {"X": 3}, {"Y": 2}, X="dynamic")])
    assert as_sets(dependency(graph, "Y", 5)) == {"X": set(range(1, 10))}  # 3rd firing: x[1..9]
    agrees_with_simulation(graph, {"X": 20})


# -- DAGs ----------------------------------------------------------------------------------


def test_two_paths_give_the_union_with_its_gaps() -> None:
    # U -A(1:1)-> V, U -B(2:1)-> W, (V, W) -C(1, 1:1)-> X. x[3]: v[3] -> u[3]; w[3] -> u[5..6].
    graph = workflow(
        [
            actor("A", {"U": 1}, {"V": 1}),
            actor("B", {"U": 2}, {"W": 1}),
            actor("C", {"V": 1, "W": 1}, {"X": 1}),
        ]
    )
    assert dependency_rows(graph, "X", 3) == [
        Dependency(None, "X", 3, "U", 3, 3),
        Dependency(None, "X", 3, "U", 5, 6),
        Dependency(None, "X", 3, "V", 3, 3),
        Dependency(None, "X", 3, "W", 3, 3),
    ]
    agrees_with_simulation(graph, {"U": 20})


def test_cdep_and_its_closure() -> None:
    # Fig. 1's shape: A reads U and writes V and W; B reads V and Y, writes X; D reads W, writes Z.
    graph = workflow(
        [
            actor("A", {"U": 1}, {"V": 1, "W": 1}),
            actor("B", {"V": 1, "Y": 1}, {"X": 1}),
            actor("D", {"W": 1}, {"Z": 1}),
        ]
    )
    assert graph.cdep() == {("V", "U"), ("W", "U"), ("X", "V"), ("X", "Y"), ("Z", "W")}
    assert graph.cdep_star("X") == {"V", "Y", "U"}
    assert graph.cdep_star("Z") == {"W", "U"}
    assert graph.cdep_star("U") == frozenset()
    loop = simple_delay_loop(1, 1, 1, 1, 1, 1, n=1)
    assert loop.cdep_star("X") == {"W", "V", "X"}  # a loop container depends on itself


def test_tokens_without_history_depend_on_nothing() -> None:
    graph = fig1(1, 1, 1, 1)
    assert dependency(graph, "U", 4) == {}
    assert dependency_rows(workflow([actor("A", {"X": 2}, {"X": 2})], initial={"X": 2}), "X", 2) == []


# -- refused models ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: workflow([actor("A", {"U": 1}, {"V": 1}), actor("B", {"W": 1}, {"V": 1})]), "written by 'A' and 'B'"),
        (lambda: workflow([Actor("A", (), (Production("V", 1),))]), "has no input"),
        (lambda: workflow([actor("A", {"U": 0}, {"V": 1})]), "positive integer"),
        (lambda: workflow([actor("A", {"U": 1}, {"V": -2})]), "positive integer"),
        (lambda: workflow([actor("A", {"U": 3}, {"V": 1}, U=2)]), "smaller than its consumption rate"),
        (lambda: workflow([Actor("A", (Consumption("U", 1, buffer=2, dynamic=True),), ())]), "not both"),
        (lambda: workflow([Actor("A", (Consumption("U"), Consumption("U")), ())]), "twice among its inputs"),
        (lambda: workflow([actor("A", {"X": 1}, {"Y": 1}), actor("B", {"Y": 1}, {"X": 1})]), "deadlocks"),
        (lambda: workflow([actor("A", {"X": 1}, {"X": 1})]), "deadlocks"),
        (lambda: workflow([actor("A", {"U": 1}, {"V": 1})], initial={"V": -1}), "positive integer"),
    ],
)
def test_ill_defined_models_are_refused(build: object, message: str) -> None:
    with pytest.raises(LocationError, match=message):
        build()  # type: ignore[operator]


def test_bad_queries_are_refused() -> None:
    graph = fig1(1, 1, 1, 1)
    with pytest.raises(LocationError, match="positive integer"):
        dependency(graph, "X", 0)
    with pytest.raises(LocationError, match="no container 'Q'"):
        dependency(graph, "Q", 1)
    with pytest.raises(LocationError, match="written by an actor"):
        simulate(graph, {"V": 3})


# -- property test against simulated runs ------------------------------------------------


def random_consumption(rnd: random.Random, container: str) -> Consumption:
    rate = rnd.randint(1, 4)
    kind = rnd.random()
    if kind < 0.25:
        return Consumption(container, rate, buffer=rate + rnd.randint(0, 4))
    if kind < 0.35:
        return Consumption(container, rate, dynamic=True)
    return Consumption(container, rate)


def random_dag(rnd: random.Random) -> tuple[Workflow, dict[str, int]]:
    sources = {f"S{i}": rnd.randint(4, 30) for i in range(rnd.randint(1, 2))}
    containers = list(sources)
    actors = []
    for a in range(rnd.randint(1, 5)):
        reads = rnd.sample(containers, min(len(containers), rnd.randint(1, 2)))
        writes = [f"C{a}_{o}" for o in range(rnd.randint(1, 2))]
        actors.append(
            Actor(
                f"A{a}",
                tuple(random_consumption(rnd, c) for c in reads),
                tuple(Production(c, rnd.randint(1, 4)) for c in writes),
            )
        )
        containers.extend(writes)
    graph = workflow(actors)
    return graph, {name: n for name, n in sources.items() if name in graph.initial}


def random_loop(rnd: random.Random) -> tuple[Workflow, dict[str, int]]:
    """A ring of 1-3 actors through containers L0..; L0 holds initial tokens; an
    outside source may feed one actor and each may write an outside container."""
    size = rnd.randint(1, 3)
    fed = rnd.randrange(size)
    actors = []
    first_rate = 1
    for i in range(size):
        inputs = [random_consumption(rnd, f"L{i}")]
        if i == 0:
            first_rate = inputs[0].rate
        if i == fed and rnd.random() < 0.5:
            inputs.append(random_consumption(rnd, "S"))
        outputs = [Production(f"L{(i + 1) % size}", rnd.randint(1, 4))]
        if rnd.random() < 0.5:
            outputs.append(Production(f"O{i}", rnd.randint(1, 3)))
        actors.append(Actor(f"A{i}", tuple(inputs), tuple(outputs)))
    graph = workflow(actors, initial={"L0": first_rate + rnd.randint(0, 2 * first_rate)})
    return graph, ({"S": rnd.randint(5, 40)} if "S" in graph.initial else {})


def test_dependency_equals_simulated_runs_on_random_dags() -> None:
    checked = sum(agrees_with_simulation(*random_dag(random.Random(seed)), max_firings=40) for seed in range(150))
    assert checked > 5000


def test_dependency_equals_simulated_runs_on_random_feedback_loops() -> None:
    checked = sum(agrees_with_simulation(*random_loop(random.Random(seed)), max_firings=12) for seed in range(150))
    assert checked > 3000
