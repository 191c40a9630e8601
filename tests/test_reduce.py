"""provplug.reduce without Spark: spec strings, the technique hook, and the
production-mode forward closure over hand-made triples (issue 14)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from provplug import hookimpl, ids, reduce
from provplug.errors import ReductionError
from provplug.model import OpInfo
from provplug.plugin.manager import Plugins, make_plugin_manager
from provplug.reduce.spec import parse_params, parse_spec, parse_specs


# -- spec strings ------------------------------------------------------------------------------
def test_a_spec_names_table_technique_parameters_and_seed() -> None:
    table, r = parse_spec("Weather=sample:ratio=0.33,seed=1")
    assert (table, r.name, dict(r.params), r.seed) == ("Weather", "sample", {"ratio": 0.33}, 1)
    _, k = parse_spec("W=kmeans:attributes=Latitude|Longitude,k=3,variant=eliminate,clusters=2,seed=7")
    assert dict(k.params) == {
        "attributes": ["Latitude", "Longitude"],
        "k": 3,
        "variant": "eliminate",
        "ratio": None,
        "clusters": [2],
        "assignment": None,
    }
    _, e = parse_spec("W=equivalence:attribute=Country,variant=eliminate,classes=Australia|Alaska USA")
    assert e.params["classes"] == ["Australia", "Alaska USA"]


def test_sql_parameters_keep_commas_equals_and_bars() -> None:
    _, r = parse_spec("W=keep:where=Tuple IN ('t0', 't1') AND a = 'x||y'")
    assert r.params == {"where": "Tuple IN ('t0', 't1') AND a = 'x||y'"}
    assert parse_params("where=a=1,b=2") == {"where": "a=1", "b": 2}  # ",b=" starts the next parameter
    assert parse_params("x=true,y=none,z=-2.5e1,w=text") == {"x": True, "y": None, "z": -25.0, "w": "text"}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("sample:ratio=0.3", "not TABLE=TECHNIQUE"),
        ("W=shuffle:ratio=0.3", "unknown reduction 'shuffle'"),
        ("W=sample:ratio=2", r"ratio must be a number in \(0, 1\]"),
        ("W=sample:ratio", "not key=value"),
        ("W=sample:ratio=0.1,ratio=0.2", "given twice"),
        ("W=sample:ratio=0.1,seed=x", "seed must be an integer"),
        ("W=sample:fraction=0.1", "unexpected keyword argument 'fraction'"),
        ("W=kmeans:attributes=a,k=2,variant=eliminate", "needs the clusters to keep or a ratio"),
        ("W=histogram:attribute=a,width=0", "width must be a positive number"),
    ],
)
def test_malformed_specs_are_one_line_reduction_errors(spec: str, message: str) -> None:
    with pytest.raises(ReductionError, match=message):
        parse_spec(spec)


def test_a_table_reduced_twice_is_refused() -> None:
    with pytest.raises(ReductionError, match="reduced twice"):
        parse_specs(["W=sample:ratio=0.5", "W=keep:where=a > 1"])


def test_reductions_describe_themselves_as_recorded() -> None:
    r = reduce.histogram("Temperature", 6)
    assert r.record() == {
        "technique": "histogram",
        "seed": 0,
        "params": {"attribute": "Temperature", "width": 6, "variant": "eliminate", "buckets": None, "ratio": None},
    }
    assert str(r) == "histogram(attribute=Temperature, width=6, variant=eliminate, seed=0)"
    assert (
        reduce.describe_run_reduction({"mode": "thesis", "tables": {"W": reduce.sample(0.5, seed=2).record()}})
        == "thesis: W=sample(ratio=0.5, seed=2)"
    )


# -- the hook --------------------------------------------------------------------------------
class _EveryOther:
    name = "every-other"
    description = "rows with an even id"

    def build(self, params: Any, seed: int) -> reduce.Reduction:
        return reduce.keep(f"{params['column']} % 2 = 0")


class _ThirdParty:
    @hookimpl
    def provplug_register_reductions(self, register: Callable[[Any], None]) -> None:
        register(_EveryOther())


def _plugins_with(*extra: object) -> Plugins:
    pm = make_plugin_manager(autoload=False)
    for plugin in extra:
        pm.register(plugin)
    return Plugins(pm)


def test_a_plugin_technique_is_named_by_spec_strings_like_the_builtins() -> None:
    plugins = _plugins_with(_ThirdParty())
    assert {"sample", "stratified", "histogram", "kmeans", "equivalence", "keep", "every-other"} <= set(
        plugins.reductions()
    )
    table, r = parse_spec("T=every-other:column=id", plugins)
    assert (table, r.name, dict(r.params)) == ("T", "keep", {"where": "id % 2 = 0"})
    with pytest.raises(ReductionError, match="unknown reduction 'every-other'"):
        parse_spec("T=every-other:column=id", _plugins_with())


def test_two_techniques_with_one_name_fail_when_plugins_load() -> None:
    from provplug.errors import PluginError

    class _Clash:
        @hookimpl
        def provplug_register_reductions(self, register: Callable[[Any], None]) -> None:
            register(type("S", (_EveryOther,), {"name": "sample"})())

    with pytest.raises(PluginError, match="reduction technique name 'sample' is registered by plugins"):
        _plugins_with(_Clash())


# -- production mode's forward closure ----------------------------------------------------------
def _cell(table: int, column: int, row: int) -> int:
    return ids.value_id(table, column, row)


def test_the_closure_keeps_paths_from_kept_rows_op_by_op(tmp_path: Path) -> None:
    from provplug.plugin.writers import TripleWriter, local_destination
    from provplug.reduce.production import filter_triples

    # Sources: W (table 1, reduced, rows 0-2, row 0 kept) and D (table 4, not reduced).
    # Op 10: W -> A (table 2), row by row. Op 11: A and D -> B (table 3).
    destination = local_destination(tmp_path / "triples")
    with TripleWriter(destination, "op10") as w:
        w.write([_cell(1, 0, r) for r in range(3)], [_cell(2, 0, r) for r in range(3)], 10, dst_table=2)
    with TripleWriter(destination, "op11") as w:
        w.write(
            [_cell(2, 0, 0), _cell(2, 0, 1), _cell(4, 0, 0), _cell(2, 0, 2)],
            [_cell(3, 0, 0), _cell(3, 0, 1), _cell(3, 1, 1), _cell(3, 0, 2)],
            11,
            dst_table=3,
        )
    ops = [OpInfo(10, "A", "r", "builtin"), OpInfo(11, "B", "r", "builtin")]
    import numpy as np

    kept = filter_triples(destination, ops, {1: np.array([0], np.int64)}, {1, 4})
    assert kept == {10: 1, 11: 2}  # W.0 -> A.0; then A.0 -> B.0 and D's cell (D is whole)
    from provplug.store.files import scan

    rows = scan(destination.filesystem(), destination.files(), "t").to_pylist()
    assert sorted((t["src"], t["dst"]) for t in rows) == sorted(
        [(_cell(1, 0, 0), _cell(2, 0, 0)), (_cell(2, 0, 0), _cell(3, 0, 0)), (_cell(4, 0, 0), _cell(3, 1, 1))]
    )


def test_the_thesis_mode_warning_reaches_stderr_without_any_logging_set_up() -> None:
    """A plain script that configured no logging sees the warning on stderr
    (Python's last-resort handler shows WARNING records)."""
    import subprocess
    import sys

    code = (
        "from provplug import reduce\nfrom provplug.ingest.capture import warn_thesis_mode\n"
        "warn_thesis_mode({'flights': reduce.sample(0.33, seed=1)})\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout == ""
    assert "reduce_mode='thesis'" in done.stderr and "computed from the kept rows only" in done.stderr
    assert "flights" in done.stderr
