"""Plugin loading, and :class:`Plugins`: the one place that calls the hooks.

Nothing here runs at import time: a manager is built on first use (or
explicitly with :func:`make_plugin_manager` in tests and embedding code).
Loading checks every hook implementation against its specification, and the
names plugins register (adapters, query methods, export formats ...) for clashes.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pluggy

from provplug.errors import PluginError
from provplug.model import StoreLocation
from provplug.plugin import hookspecs
from provplug.plugin.markers import PROJECT_NAME

if TYPE_CHECKING:
    from provplug.model import OpInfo, RunInfo, StepInfo
    from provplug.plugin.connection import Connection
    from provplug.plugin.protocols import CaptureAdapter, ExportFormat, QueryMethod, WorkflowGraph, WriteInterceptor
    from provplug.plugin.reductions import ReductionTechnique

ENTRY_POINT_GROUP = PROJECT_NAME
DISABLE_AUTOLOAD_ENV = "PROVPLUG_DISABLE_PLUGIN_AUTOLOAD"
BLOCK_ENV = "PROVPLUG_BLOCK_PLUGINS"

# Core behaviour, registered through the same hookimpl path as any plugin.
BUILTIN_PLUGINS: tuple[str, ...] = (
    "provplug.store.parquet",
    "provplug.query.methods",
    "provplug.index.autosplit",
    "provplug.index.at_commit",
    "provplug.reduce.techniques",
    "provplug.export.formats",
)


def make_plugin_manager(*, autoload: bool | None = None, blocked: Iterable[str] | None = None) -> pluggy.PluginManager:
    """Build a manager: built-ins, then ``provplug`` entry points, then check.

    ``autoload`` defaults to true unless ``PROVPLUG_DISABLE_PLUGIN_AUTOLOAD=1``;
    ``blocked`` (default: comma-separated ``PROVPLUG_BLOCK_PLUGINS``) names
    plugins, built-in or entry point, that must not be registered.
    """
    if autoload is None:
        autoload = os.environ.get(DISABLE_AUTOLOAD_ENV, "") not in ("1", "true", "yes")
    if blocked is None:
        blocked = [b.strip() for b in os.environ.get(BLOCK_ENV, "").split(",") if b.strip()]
    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    for name in blocked:
        pm.set_blocked(name)
    for module_name in BUILTIN_PLUGINS:
        if not pm.is_blocked(module_name):
            pm.register(importlib.import_module(module_name), name=module_name)
    if autoload:
        try:
            pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
        except (ImportError, AttributeError) as exc:
            raise PluginError(f"cannot load a provplug plugin: {exc}") from exc
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"invalid plugin: {exc}") from exc
    return pm


class Plugins:
    """Typed access to the hooks (the only caller of ``pm.hook``).

    Building one (:meth:`load`) also collects the registered adapters,
    query methods, reductions, write interceptors and export formats once,
    so that two plugins registering one name fail at load time rather than
    one silently replacing the other.
    """

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self.pm = pm
        self.adapters()
        self.query_methods()
        self.reductions()
        self.write_interceptors()
        self.export_formats()

    @classmethod
    def load(cls, **kwargs: Any) -> Plugins:
        """Plugins from a new manager (see :func:`make_plugin_manager`)."""
        return cls(make_plugin_manager(**kwargs))

    # -- discovery -----------------------------------------------------------
    def adapters(self) -> list[CaptureAdapter]:
        """The registered capture adapters, in the order the hook returns them."""
        return _unique(self._registered("provplug_register_adapters"), "capture adapter")

    def adapter_for(self, engine: object) -> CaptureAdapter:
        """The first adapter that accepts ``engine``."""
        adapters = self.adapters()
        for adapter in adapters:
            if adapter.accepts(engine):
                return adapter
        raise PluginError(
            f"no capture adapter accepts a {type(engine).__name__} "
            f"(loaded: {', '.join(a.name for a in adapters) or 'none'})"
        )

    def write_interceptors(self) -> list[WriteInterceptor]:
        """The registered write interceptors, in the order the hook returns them."""
        return _unique(self._registered("provplug_register_write_interceptors"), "write interceptor")

    def query_methods(self) -> dict[str, QueryMethod]:
        """The registered query methods by name."""
        methods: list[QueryMethod] = _unique(self._registered("provplug_register_query_methods"), "query method")
        return {m.name: m for m in methods}

    def reductions(self) -> dict[str, ReductionTechnique]:
        """The registered reduction techniques by name."""
        techniques: list[ReductionTechnique] = _unique(
            self._registered("provplug_register_reductions"), "reduction technique"
        )
        return {t.name: t for t in techniques}

    def export_formats(self) -> dict[str, ExportFormat]:
        """The registered export formats by name, in the order the hook returns them."""
        formats: list[ExportFormat] = _unique(self._registered("provplug_register_export_formats"), "export format")
        return {f.name: f for f in formats}

    def store_location(self, uri: str) -> StoreLocation:
        """Where the store of ``uri`` lives, as the first store backend to answer says."""
        location = self.pm.hook.provplug_store_location(uri=uri)
        if location is None:
            raise PluginError(f"no store backend accepts {uri!r}")
        if not isinstance(location, StoreLocation):
            raise PluginError(
                f"the store backend for {uri!r} returned a {type(location).__name__}, "
                "not a provplug.model.StoreLocation"
            )
        return location

    def filesystem_settings(self, engine: object) -> Connection | None:
        """How a capture on ``engine`` reaches object storage, as the first plugin to answer says."""
        answer: Connection | None = self.pm.hook.provplug_filesystem_settings(engine=engine)
        return answer

    def choose_splits(self, workflow: WorkflowGraph, stats: Mapping[str, Any]) -> list[Any] | None:
        """The splits of the first split chooser to answer, or None."""
        answer: list[Any] | None = self.pm.hook.provplug_choose_splits(workflow=workflow, stats=stats)
        return answer

    def _registered(self, hook_name: str) -> list[tuple[str, Any]]:
        """(plugin name, item) for every ``register(item)`` call of a register
        hook, in the order pluggy calls its implementations."""
        caller: pluggy.HookCaller = getattr(self.pm.hook, hook_name)
        found: list[tuple[str, Any]] = []
        # pluggy calls the implementations last-registered first (tryfirst and
        # trylast respected), which is reversed(get_hookimpls()). Each is called
        # here on its own so that every registered item can name its plugin.
        for impl in reversed(caller.get_hookimpls()):
            if impl.hookwrapper or impl.wrapper:
                raise PluginError(f"plugin {impl.plugin_name!r}: {hook_name} cannot be a hook wrapper")

            def register(item: Any, plugin: str = impl.plugin_name) -> None:
                found.append((plugin, item))

            impl.function(**({"register": register} if "register" in impl.argnames else {}))
        return found

    # -- lifecycle -----------------------------------------------------------
    def run_started(self, run: RunInfo) -> None:
        self.pm.hook.provplug_run_started(run=run)

    def run_finished(self, run: RunInfo, error: BaseException | None) -> None:
        self.pm.hook.provplug_run_finished(run=run, error=error)

    def step_started(self, run: RunInfo, step: StepInfo) -> None:
        self.pm.hook.provplug_step_started(run=run, step=step)

    def step_finished(self, run: RunInfo, step: StepInfo, op: OpInfo) -> None:
        self.pm.hook.provplug_step_finished(run=run, step=step, op=op)

    def step_failed(self, run: RunInfo, step: StepInfo, error: BaseException) -> None:
        self.pm.hook.provplug_step_failed(run=run, step=step, error=error)

    # -- introspection -------------------------------------------------------
    def describe(self) -> list[dict[str, str]]:
        """Each registered plugin with the distribution that provides it."""
        dists = {id(plugin): dist for plugin, dist in self.pm.list_plugin_distinfo()}
        rows = []
        for name, plugin in sorted(self.pm.list_name_plugin(), key=lambda np: np[0]):
            if plugin is None:
                continue
            dist = dists.get(id(plugin))
            rows.append(
                {
                    "name": name,
                    "module": getattr(plugin, "__name__", type(plugin).__name__),
                    "distribution": f"{dist.project_name} {dist.version}" if dist else "provplug (built-in)",
                    "hooks": ", ".join(sorted(h.name for h in self.pm.get_hookcallers(plugin) or [])),
                }
            )
        return rows


def _unique(registered: list[tuple[str, Any]], what: str) -> list[Any]:
    """The registered items, after checking that no two share a ``name``."""
    owner: dict[str, str] = {}
    for plugin, item in registered:
        name = getattr(item, "name", None)
        if not isinstance(name, str) or not name:
            raise PluginError(f"plugin {plugin!r} registered a {what} without a name: {item!r}")
        if name in owner:
            first = owner[name]
            by = f"twice by plugin {plugin!r}" if first == plugin else f"by plugins {first!r} and {plugin!r}"
            raise PluginError(f"{what} name {name!r} is registered {by}")
        owner[name] = plugin
    return [item for _, item in registered]


_default: Plugins | None = None


def get_plugins() -> Plugins:
    """The process-wide plugins, loaded on first call."""
    global _default
    if _default is None:
        _default = Plugins.load()
    return _default


def reset_plugins(plugins: Plugins | None = None) -> None:
    """Replace (or forget) the process-wide plugins; for tests and embedding."""
    global _default
    _default = plugins
