"""What the plan rewrite asks of Spark's JVM in few py4j round trips, by the
small Java class provplug compiles there (provplug_spark._jvm): a Scala Seq
of JVM objects, and the plan that stands in for a leaf of a script's plan
(Catalyst.standing_in: the leaf's columns, names, types and expression ids,
taken from another plan's by name; built column by column in Python only
where a column must be cast or is missing)."""

from __future__ import annotations

from typing import Any

import pytest

COLUMNS = 30


class _RoundTrips:
    """py4j method calls this thread makes (not other threads' calls, nor the
    commands py4j sends on its own when a proxy is garbage collected)."""

    def __init__(self, mocker: Any) -> None:
        import threading

        from py4j.clientserver import ClientServerConnection

        self.count = 0
        real = ClientServerConnection.send_command
        me = threading.get_ident()

        def counted(connection: Any, command: str, *args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() == me and command.startswith("c\n"):
                self.count += 1
            return real(connection, command, *args, **kwargs)

        mocker.patch.object(ClientServerConnection, "send_command", counted)


def _ids(jvm: Any, plan: Any) -> list[tuple[str, int]]:
    return [(str(a.name()), jvm.expr_id(a)) for a in jvm.items(plan.output())]


def _wide(spark: Any, first: int) -> Any:
    names = [f"c{i}" for i in range(COLUMNS)]
    return spark.createDataFrame([tuple(range(first, first + COLUMNS))], ", ".join(f"{n} long" for n in names))


def test_a_wide_leaf_stands_in_over_another_plan_in_a_few_round_trips(spark: Any, mocker: Any) -> None:
    from provplug_spark._jvm import Catalyst

    jvm = Catalyst(spark)
    leaf, stored = jvm.plan(_wide(spark, 0)), _wide(spark, 100)
    round_trips = _RoundTrips(mocker)
    plan = jvm.standing_in(leaf, stored)
    made_in = round_trips.count
    assert made_in < 10  # column by column: about fourteen a column
    assert _ids(jvm, plan) == _ids(jvm, leaf)  # the leaf's own attributes, so the plan above reads them
    assert list(jvm.frame(plan).collect()[0]) == list(range(100, 100 + COLUMNS))  # the other plan's rows


def test_a_column_of_another_type_is_cast_and_a_missing_one_fails_by_name(spark: Any) -> None:
    from provplug_spark._jvm import Catalyst

    from provplug.errors import CaptureError

    jvm = Catalyst(spark)
    leaf = jvm.plan(spark.createDataFrame([(1, "a")], "k long, v string"))
    plan = jvm.standing_in(leaf, spark.createDataFrame([(7, "b")], "k int, v string"))
    assert _ids(jvm, plan) == _ids(jvm, leaf)
    assert [tuple(r) for r in jvm.frame(plan).collect()] == [(7, "b")]
    assert dict(jvm.frame(plan).dtypes)["k"] == "bigint"
    with pytest.raises(CaptureError, match="column 'v' is not among"):
        jvm.standing_in(leaf, spark.createDataFrame([(7,)], "k long"))


@pytest.mark.parametrize("size", [0, 1, 8, 9, 15, 16, 30])
def test_a_seq_of_jvm_objects_takes_a_round_trip_for_eight_and_one_for_each_seven_more(
    spark: Any, mocker: Any, size: int
) -> None:
    from provplug_spark._jvm import Catalyst

    jvm = Catalyst(spark)
    items = [spark._jvm.java.lang.StringBuilder(f"c{i}") for i in range(size)]  # JVM objects
    round_trips = _RoundTrips(mocker)
    made = jvm.seq(items)
    assert round_trips.count == 1 + max(0, -(-(size - 8) // 7))
    assert [str(c.toString()) for c in jvm.items(made)] == [str(c.toString()) for c in items]
