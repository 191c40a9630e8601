"""Contract checks: what every capture adapter's committed store must satisfy.

Each ``assert_*`` function raises :class:`ContractViolation` (an
``AssertionError``, so pytest reports it as a test failure) naming the first
broken rule (and returns what it checked, where that is of use). They read the store only through its public
protocol and the one triple scan, so they hold for any adapter and backend.
"""

from __future__ import annotations

import collections
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pluggy

from provplug import ids
from provplug.errors import PluginError
from provplug.plugin.manager import Plugins, make_plugin_manager
from provplug.plugin.protocols import CaptureAdapter, Store

from .oracle import DIRECTIONS, Direction, OracleAnswer, StoreContents, StoreLike, TripleOracle, _opened, freeze


class ContractViolation(AssertionError):
    """A capture adapter broke a rule of the store contract."""


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ContractViolation(message)


# -- the store ------------------------------------------------------------------------------
def assert_store_conforms(store: StoreLike, run: str | None = None, *, dense_rows: bool = False) -> StoreContents:
    """Check what any capture must have committed, for run ``run`` (default:
    every run), and return the store read back.

    * the store verifies (:meth:`Store.verify`: manifests, catalogues, footers),
    * every op's inputs and outputs are catalogued tables of the store,
    * a table that stores rows stores exactly ``rows`` of them, under distinct
      row numbers (``dense_rows=True``: numbered ``0 .. rows-1``, as an engine
      that numbers rows by position does; Spark numbers them by partition),
    * every triple's ``src`` and ``dst`` decode to a catalogued table, one of
      its columns, and a row it stores (or, with ``dense_rows``, a row below
      its size); ``src_table``/``dst_table`` are the tables the ids name,
    * every triple's op is a stored op that reads the source's table and
      writes the destination's; no triple is stored twice,
    * an op's recorded triple count is the number of its triples, and a run's
      manifest counts its tables, ops and triples (stored plus location).
    """
    opened = _opened(store)
    opened.verify()
    got = StoreContents(opened, run)
    catalogue = {t["table_id"]: t for t in opened.tables().to_pylist()}  # a run may read an earlier run's table
    _check_ops(got, catalogue)
    _check_rows(got, dense_rows)
    _check_triples(got, catalogue, dense_rows)
    _check_counts(got, opened)
    return got


def _check_ops(got: StoreContents, catalogue: Mapping[int, Mapping[str, Any]]) -> None:
    for op in got.ops_by_id.values():
        name = op["name"]
        for tid in (*op["inputs"], *op["outputs"]):
            _require(tid in catalogue, f"op {name!r} names table id {tid}, which the store does not catalogue")
        for tid in op["outputs"]:
            _require(catalogue[tid]["run_id"] == op["run_id"], f"op {name!r} writes table {tid} of another run")


def _check_rows(got: StoreContents, dense_rows: bool) -> None:
    for tid, table in got.by_id.items():
        rows = got.rows_by_id.get(tid)
        if not table["stored_rows"]:
            _require(rows is None, f"table {table['name']!r} says it stores no rows but has some")
            continue
        _require(rows is not None, f"table {table['name']!r} says it stores rows but has none")
        assert rows is not None
        _require(
            len(rows) == table["rows"],
            f"table {table['name']!r} stores {len(rows)} rows, its catalogue entry says {table['rows']}",
        )
        if dense_rows:
            _require(
                sorted(rows) == list(range(len(rows))),
                f"table {table['name']!r}: row numbers are not 0..{len(rows) - 1}",
            )


def _check_triples(got: StoreContents, catalogue: Mapping[int, Mapping[str, Any]], dense_rows: bool) -> None:
    ops_by_id = got.ops_by_id
    seen: set[tuple[int, int, int]] = set()
    for t in got.triples:
        key = (t["src"], t["dst"], t["op"])
        _require(key not in seen, f"triple {t} is stored twice")
        seen.add(key)
        _require(t["op"] in ops_by_id, f"triple {t} names op id {t['op']}, which the run does not store")
        op = ops_by_id[t["op"]]
        for end, allowed in (("src", op["inputs"]), ("dst", op["outputs"])):
            tid = _check_value(got, catalogue, t[end], dense_rows, f"the {end} of triple {t}")
            _require(t[f"{end}_table"] == tid, f"triple {t}: {end}_table is not the table its id names")
            _require(
                tid in allowed,
                f"triple {t}: op {op['name']!r} does not {'read' if end == 'src' else 'write'} "
                f"table {catalogue[tid]['name']!r}",
            )


def _check_value(
    got: StoreContents, catalogue: Mapping[int, Mapping[str, Any]], vid: int, dense_rows: bool, what: str
) -> int:
    """The table of value ``vid``, after checking that it names a stored cell."""
    _require(ids.is_packed(vid), f"{what}: {vid} is not a captured value id")
    tid, column, row = ids.unpack(vid)
    _require(tid in catalogue, f"{what}: table id {tid} is not catalogued")
    table = catalogue[tid]
    _require(column < len(table["columns"]), f"{what}: column {column} of table {table['name']!r} does not exist")
    stored = got.rows_by_id.get(tid)
    if stored is not None:
        _require(row in stored, f"{what}: table {table['name']!r} stores no row {row}")
    elif dense_rows and table["rows"] is not None:
        _require(row < table["rows"], f"{what}: row {row} is beyond table {table['name']!r}'s {table['rows']} rows")
    return tid


def _check_counts(got: StoreContents, store: Store[Any]) -> None:
    per_op = collections.Counter(t["op"] for t in got.triples)
    for op in got.ops_by_id.values():
        if op["triples"] is not None:
            _require(
                op["triples"] == per_op[op["op_id"]],
                f"op {op['name']!r} records {op['triples']} triples, the store holds {per_op[op['op_id']]}",
            )
    for manifest in store.runs():
        if got.run_id is not None and manifest["run_id"] != got.run_id:
            continue
        run_id, counts = manifest["run_id"], manifest["counts"]
        tables = sum(1 for t in got.by_id.values() if t["run_id"] == run_id)
        ops = sum(1 for o in got.ops_by_id.values() if o["run_id"] == run_id)
        triples = sum(n for op_id, n in per_op.items() if got.ops_by_id[op_id]["run_id"] == run_id)
        counted = counts.get("triples", 0) + counts.get("location_triples", 0)
        _require(
            (counts["tables"], counts["ops"], counted) == (tables, ops, triples),
            f"run {run_id}: manifest counts {counts['tables']} tables, {counts['ops']} ops, {counted} triples; "
            f"the store holds {tables}, {ops}, {triples}",
        )


def assert_outputs_match(
    store: StoreLike, produced: Mapping[str, Iterable[Mapping[str, Any]]], run: str | None = None
) -> None:
    """Each table ``name`` of ``produced`` stores exactly the rows the pipeline
    produced for it (compared as multisets: an engine need not keep order).
    ``produced`` maps table names to the rows read back by the engine's own
    means (``DataFrame.collect()``, a Beam sink, a list). When several runs
    wrote a table of that name, ``run`` must say which."""
    got = StoreContents(store, run)
    for name, rows in produced.items():
        _require(name in got.tables, f"no table {name!r} was stored (tables: {', '.join(sorted(got.tables))})")
        named = [tid for tid, t in got.by_id.items() if t["name"] == name]
        _require(len(named) == 1, f"{len(named)} runs wrote a table {name!r}: say which run")
        stored = got.rows_by_id.get(named[0])
        _require(stored is not None, f"table {name!r} stores no rows")
        assert stored is not None
        want = collections.Counter(freeze(dict(r)) for r in rows)
        have = collections.Counter(freeze(r) for r in stored.values())
        _require(
            have == want,
            f"table {name!r}: stored rows differ from the pipeline's: "
            f"missing {list((want - have).elements())[:3]}, extra {list((have - want).elements())[:3]}",
        )


def assert_run_is_atomic(
    store: str | Path, attempt: Callable[[], object], error: type[BaseException] = Exception
) -> BaseException:
    """A run commits whole or not at all: ``attempt()`` runs a capture into
    the local store ``store`` that fails (raises ``error``, which is returned);
    afterwards no store exists if none did, or the store holds the same runs
    and counts as before and no staging folder."""
    path = Path(store)
    existed = path.exists()
    before = _committed(path) if existed else None
    try:
        attempt()
    except error as exc:
        raised: BaseException = exc
    else:
        raise ContractViolation("the failing capture raised nothing")
    if not existed:
        _require(not path.exists() or not _committed(path)[0], f"a failed run left a store with runs at {path}")
    else:
        _require(_committed(path) == before, f"a failed run changed the committed contents of {path}")
    staging = path / "_staging"
    _require(not staging.exists() or not any(staging.iterdir()), f"a failed run left staging folders in {staging}")
    return raised


def _committed(path: Path) -> tuple[list[str], dict[str, int]]:
    opened = _opened(path)
    return [m["run_id"] for m in opened.runs()], opened.stats()


# -- the plugin -------------------------------------------------------------------------------
def assert_registered_through_entry_point(adapter: str) -> CaptureAdapter:
    """The adapter named ``adapter`` is registered by a plugin that provplug
    loaded from the ``provplug`` entry point group (not by a built-in), every
    hook implementation of every plugin passes pluggy's ``check_pending``,
    and the registered object is a :class:`~provplug.plugin.protocols.CaptureAdapter`.
    Returns the adapter."""
    pm = make_plugin_manager(autoload=True)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise ContractViolation(f"a hook implementation matches no specification: {exc}") from exc
    owners = _adapter_owners(pm)
    _require(adapter in owners, f"no plugin registers an adapter named {adapter!r} (adapters: {sorted(owners)})")
    plugin_name, registered = owners[adapter]
    from_entry_points = {id(plugin) for plugin, _ in pm.list_plugin_distinfo()}
    _require(
        id(pm.get_plugin(plugin_name)) in from_entry_points,
        f"adapter {adapter!r} is registered by {plugin_name!r}, which was not loaded from the entry point group",
    )
    if not isinstance(registered, CaptureAdapter):
        raise ContractViolation(f"adapter {adapter!r} lacks what CaptureAdapter requires")
    try:
        Plugins(pm)  # the names every plugin registers are unique
    except PluginError as exc:
        raise ContractViolation(str(exc)) from exc
    return registered


def _adapter_owners(pm: pluggy.PluginManager) -> dict[str, tuple[str, Any]]:
    """Adapter name -> (name of the plugin that registers it, the adapter)."""
    owners: dict[str, tuple[str, Any]] = {}
    for impl in pm.hook.provplug_register_adapters.get_hookimpls():
        registered: list[Any] = []
        impl.function(register=registered.append)
        owners.update((getattr(a, "name", repr(a)), (impl.plugin_name, a)) for a in registered)
    return owners


# -- lineage ----------------------------------------------------------------------------------
def assert_lineage_matches_oracle(
    store: StoreLike,
    values: Sequence[int] | None = None,
    *,
    methods: Sequence[str] | None = None,
    directions: Sequence[Direction] = DIRECTIONS,
    sample: int = 50,
    seed: int = 0,
    spark: Any = None,
) -> None:
    """Every query method answers every query as :class:`TripleOracle` does.

    ``values``: the value ids to query one at a time (default: up to
    ``sample`` of the values the triples name, drawn with ``seed``);
    ``methods``: default every registered query method. Each answer's values
    and its edges as ``(src, dst, op name)`` must equal the oracle's. The store is indexed
    first if it has no index (this writes its ``index/`` folder). With a
    ``spark`` session, each method also answers all ``values`` in one query
    on Spark (``tau=0``), which must equal the oracle's answer for them all.
    """
    import provplug
    from provplug.index import build_index, read_meta

    opened = _opened(store)
    if read_meta(opened) is None:
        build_index(opened, engine="local")
    oracle = TripleOracle.of_store(opened)
    queried = list(values) if values is not None else _sample(oracle, sample, seed)
    _require(bool(queried), "no values to query: the store holds no triples")
    facade = provplug.open(opened.uri)
    chosen = list(methods) if methods is not None else sorted(facade.plugins.query_methods())
    for direction in directions:
        for method in chosen:
            for value in queried:
                got = _answered(facade.lineage(value_id=value, method=method, direction=direction))
                _require(
                    got == oracle.answer([value], direction),
                    f"method {method!r}, {direction} from {value}: answer differs from the oracle's",
                )
            if spark is not None:
                got = _answered(
                    facade.lineage(value_id=queried, method=method, direction=direction, tau=0, spark=spark)
                )
                _require(
                    got == oracle.answer(queried, direction),
                    f"method {method!r} on Spark, {direction} from {len(queried)} values: differs from the oracle",
                )


def _sample(oracle: TripleOracle, size: int, seed: int) -> list[int]:
    values = sorted(oracle.values)
    return values if len(values) <= size else random.Random(seed).sample(values, size)


def _answered(answer: Any) -> OracleAnswer:
    data = answer.to_dict()
    triples = frozenset((e["src"], e["dst"], e["op"]) for e in data["edges"])
    return OracleAnswer(
        frozenset(r["value_id"] for r in data["lineage"]), frozenset((s, d) for s, d, _ in triples), triples
    )
