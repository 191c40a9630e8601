"""The plugin system: built-ins, entry-point discovery, validation, blocking."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES

import provplug
from provplug.errors import PluginError
from provplug.plugin import hookspecs
from provplug.plugin.manager import BUILTIN_PLUGINS, Plugins, make_plugin_manager

RECORDS_SRC = EXAMPLES / "records_adapter"


def install_entry_point(site: Path, dist: str, name: str, target: str, source: Path | None = None) -> None:
    """Make ``site`` look like site-packages holding distribution ``dist``
    whose ``provplug`` entry point ``name`` is ``target``: the same metadata
    ``pip install`` writes, without a network or a build."""
    info = site / f"{dist.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[provplug]\n{name} = {target}\n")
    if source is not None:
        (site / f"{dist}.pth").write_text(str(source) + "\n")


@pytest.fixture
def records_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    site = tmp_path / "site"
    install_entry_point(site, "provplug-records", "records", "provplug_records")
    monkeypatch.syspath_prepend(str(RECORDS_SRC))
    monkeypatch.syspath_prepend(str(site))
    yield
    sys.modules.pop("provplug_records", None)


def test_builtins_and_shipped_adapters_register_through_entry_points() -> None:
    plugins = Plugins.load()
    names = {row["name"]: row for row in plugins.describe()}
    assert set(BUILTIN_PLUGINS) <= set(names)
    assert names["spark"]["distribution"].startswith("provplug ")
    assert names["beam"]["distribution"].startswith("provplug ")
    assert {"spark", "beam"} <= {a.name for a in plugins.adapters()}


def test_no_plugin_manager_is_built_at_import_time() -> None:
    import importlib

    import provplug.plugin.manager as plugins_module

    importlib.reload(plugins_module)
    assert plugins_module._default is None


def test_third_party_adapter_is_discovered_and_called_like_builtins(
    records_installed: None, cli, store_path: Path
) -> None:
    r = cli("plugins")
    line = next(row for row in r.out.splitlines() if row.startswith("records"))
    assert "provplug-records 0.1.0" in line
    assert "provplug_register_adapters" in line

    import provplug_records as rec

    rec.EVENTS.clear()

    @provplug.step("Upper", output="Shouting")
    def upper(records: rec.Records) -> list[dict[str, str]]:
        return [{k: str(v).upper() for k, v in row.items()} for row in records.rows]

    with provplug.capture(rec.RecordsEngine(), store=store_path) as run:
        people = run.source([{"name": "ann", "city": "ny"}, {"name": "bo", "city": "la"}], "People")
        out = upper(people)
    assert out.rows == [{"name": "ANN", "city": "NY"}, {"name": "BO", "city": "LA"}]
    assert rec.EVENTS == [
        ("run_started", "records"),
        ("step_finished", "Upper:8"),  # 2 rows x 2 columns x 2 columns
        ("session_closed", "ok"),
        ("run_finished", "committed"),
    ]
    stats = provplug.open_store(store_path).stats()
    assert (stats["tables"], stats["ops"], stats["triples"], stats["values"]) == (2, 1, 8, 8)


def test_a_step_outside_capture_runs_unchanged() -> None:
    calls = []

    @provplug.step("Double", output="Doubled")
    def double(x: int) -> int:
        calls.append(x)
        return 2 * x

    assert double(21) == 42 and calls == [21]


def test_failed_run_commits_nothing_and_reports_failure(records_installed: None, store_path: Path) -> None:
    import provplug_records as rec

    rec.EVENTS.clear()

    @provplug.step("Boom", output="Never")
    def boom(records: rec.Records) -> list[dict[str, str]]:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"), provplug.capture(rec.RecordsEngine(), store=store_path) as run:
        boom(run.source([{"a": 1}], "A"))
    assert rec.EVENTS[-2:] == [("session_closed", "error"), ("run_finished", "failed")]
    assert not store_path.exists()  # the store did not exist before: nothing is left


def test_misspelled_hook_implementation_fails_loudly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "src"
    pkg.mkdir()
    (pkg / "typo_plugin.py").write_text(
        "import provplug\n\n@provplug.hookimpl\ndef provplug_register_adaptors(register):\n    pass\n"
    )
    install_entry_point(tmp_path / "site", "provplug-typo", "typo", "typo_plugin")
    monkeypatch.syspath_prepend(str(pkg))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(PluginError, match="provplug_register_adaptors"):
        make_plugin_manager()


def test_wrong_hook_arguments_fail_loudly() -> None:
    class Bad:
        @provplug.hookimpl
        def provplug_run_started(self, run, extra):  # type: ignore[no-untyped-def]  # a deliberately bad hook
            pass

    pm = make_plugin_manager(autoload=False)
    with pytest.raises(Exception, match="extra"):
        pm.register(Bad())


def test_autoload_can_be_disabled_and_plugins_blocked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVPLUG_DISABLE_PLUGIN_AUTOLOAD", "1")
    assert {a.name for a in Plugins.load().adapters()} == set()
    monkeypatch.delenv("PROVPLUG_DISABLE_PLUGIN_AUTOLOAD")
    monkeypatch.setenv("PROVPLUG_BLOCK_PLUGINS", "beam")
    assert {a.name for a in Plugins.load().adapters()} == {"spark"}


def test_no_adapter_for_an_unknown_engine_is_a_clear_error(store_path: Path) -> None:
    with pytest.raises(PluginError, match="no capture adapter accepts a dict"), provplug.capture({}, store=store_path):
        pass
    assert not store_path.exists()


def test_every_hookspec_is_documented_and_prefixed() -> None:
    """Each hook's docstring is its reference, pytest-style: every parameter
    under ``:param name:``, and ``:returns:`` for hooks that return a value."""
    specs = [n for n in dir(hookspecs) if n.startswith("provplug_")]
    assert len(specs) >= 9
    for name in specs:
        hook = getattr(hookspecs, name)
        doc = inspect.getdoc(hook)
        assert doc, name
        signature = inspect.signature(hook)
        for param in signature.parameters:
            assert f":param {param}:" in doc, f"{name}: {param} is not documented"
        returns = signature.return_annotation not in ("None", None)
        assert (":returns:" in doc) == returns, f"{name}: :returns: {'missing' if returns else 'for no value'}"


class _NamedThing:
    def __init__(self, name: str) -> None:
        self.name = name
        self.description = name

    def accepts(self, engine: object) -> bool:
        return False


def _adapters(*names: str) -> object:
    class Adapters:
        @provplug.hookimpl
        def provplug_register_adapters(self, register: Callable[[Any], None]) -> None:
            for name in names:
                register(_NamedThing(name))

    return Adapters()


def test_two_plugins_registering_one_adapter_name_fail_at_load() -> None:
    pm = make_plugin_manager(autoload=False)
    pm.register(_adapters("records"), name="first-plugin")
    pm.register(_adapters("records"), name="second-plugin")
    with pytest.raises(
        PluginError,
        match=r"capture adapter name 'records' is registered by plugins "
        r"'second-plugin' and 'first-plugin'",
    ):
        Plugins(pm)


def test_one_plugin_registering_a_name_twice_fails_at_load() -> None:
    pm = make_plugin_manager(autoload=False)
    pm.register(_adapters("x", "x"), name="twice")
    with pytest.raises(PluginError, match="registered twice by plugin 'twice'"):
        Plugins(pm)


def test_a_third_party_adapter_cannot_take_a_builtin_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "src"
    pkg.mkdir()
    (pkg / "fake_spark.py").write_text(
        "import provplug\n\n"
        "class Fake:\n    name = 'spark'\n    def accepts(self, engine):\n        return False\n\n"
        "@provplug.hookimpl\ndef provplug_register_adapters(register):\n    register(Fake())\n"
    )
    install_entry_point(tmp_path / "site", "provplug-fake", "fake", "fake_spark")
    monkeypatch.syspath_prepend(str(pkg))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(PluginError, match=r"'spark' is registered by plugins '(spark|fake)' and '(spark|fake)'"):
        Plugins.load()


def test_a_query_method_name_clash_names_both_plugins() -> None:
    class Methods:
        @provplug.hookimpl
        def provplug_register_query_methods(self, register: Callable[[Any], None]) -> None:
            register(_NamedThing("rq"))

    pm = make_plugin_manager(autoload=False)
    pm.register(Methods(), name="my-methods")
    with pytest.raises(
        PluginError,
        match=r"query method name 'rq' is registered by plugins "
        r"'my-methods' and 'provplug\.query\.methods'",
    ):
        Plugins(pm)


def test_registered_items_keep_the_hook_call_order() -> None:
    pm = make_plugin_manager(autoload=False)
    pm.register(_adapters("a1", "a2"), name="a")
    pm.register(_adapters("b1"), name="b")
    called: list[Any] = []
    pm.hook.provplug_register_adapters(register=called.append)  # pluggy's own order: last registered first
    assert [a.name for a in Plugins(pm).adapters()] == [a.name for a in called] == ["b1", "a1", "a2"]


def test_a_store_backend_must_return_a_location() -> None:
    class Broken:
        @provplug.hookimpl
        def provplug_store_location(self, uri: str) -> object:
            return object()

    plugins = Plugins.load(autoload=False)
    plugins.pm.register(Broken())
    with pytest.raises(PluginError, match=r"returned a object, not a provplug\.model\.StoreLocation"):
        provplug.open_store("anything", plugins)


def test_a_store_backend_plugin_answers_before_the_builtin(tmp_path: Path) -> None:
    """`provplug_store_location` (firstresult): a plugin can map its own URIs
    to where the store lives (here an alias for a folder); the format stays
    provplug's. Anything it declines falls through to the built-in backend."""
    import pyarrow.fs as pafs

    from provplug.ingest.importer import import_provenance
    from provplug.model import StoreLocation
    from provplug.plugin.manager import reset_plugins
    from provplug.store.parquet import ParquetStore

    reached: list[str] = []

    class AliasStores:
        @provplug.hookimpl
        def provplug_store_location(self, uri: str) -> StoreLocation | None:
            if uri.startswith("alias:"):
                reached.append(uri)
                return StoreLocation(uri, pafs.LocalFileSystem(), str(tmp_path / uri.removeprefix("alias:")))
            return None

    plugins = Plugins.load(autoload=False)
    plugins.pm.register(AliasStores())
    reset_plugins(plugins)
    store = provplug.open_store("alias:team.prov")
    assert reached == ["alias:team.prov"] and store.root == str(tmp_path / "team.prov") and store.local
    import_provenance(store, EXAMPLES / "data" / "paper_table4_triples.csv")
    assert provplug.open_store(tmp_path / "team.prov").stats()["triples"] == 15  # the same bytes, at their path
    assert provplug.open_store("alias:team.prov").stats()["triples"] == 15
    assert type(provplug.open_store(tmp_path / "other.prov")) is ParquetStore
