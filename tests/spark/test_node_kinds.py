"""One record per Spark plan node kind (issue 24): every fact capture uses
about a node is read from :data:`provplug_spark.rules.NODE_KINDS`."""

from __future__ import annotations

from provplug_spark import aligned, rules


def test_every_node_kind_is_captured_by_a_rule_or_refused_by_name() -> None:
    for name, kind in rules.NODE_KINDS.items():
        assert kind.name == name
        assert (kind.rule is None) != (kind.refused is None), name


def test_only_captured_copies_can_be_opaque_and_only_wrapped_functions_carry_an_eval_type() -> None:
    for kind in rules.NODE_KINDS.values():
        if kind.opaque is not None:
            assert kind.rule is rules.copy, kind.name
        if kind.wrapped is not None:
            assert kind.merging and kind.unstable, kind.name


def test_the_rewrites_node_sets_follow_the_records() -> None:
    assert "Aggregate" in rules.MERGING_NODES and "Filter" not in rules.MERGING_NODES
    assert {"GlobalLimit", "Sample", "Window"} <= rules.UNSTABLE_NODES and "Project" not in rules.UNSTABLE_NODES
    assert {"LogicalRelation", "Range", "Project"} <= rules.INJECTIVE_NODES and "Join" not in rules.INJECTIVE_NODES


def test_location_lineage_follows_projections_and_aliases_only() -> None:
    kept = {name for name in rules.NODE_KINDS if aligned._keeps_rows_aligned(name)}
    assert kept == {"Project", "SubqueryAlias"}
    assert not aligned._keeps_rows_aligned("NoSuchNode")
