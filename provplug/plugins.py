"""Plugin loading, and :class:`Plugins`: the one place that calls ``pm.hook.*``.

Nothing here runs at import time: a manager is built on first use (or
explicitly with :func:`make_plugin_manager` in tests and embedding code).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable, Mapping
from importlib import metadata
from typing import TYPE_CHECKING, Any, TypeVar

import pluggy

from . import hookspecs
from .errors import PluginError

if TYPE_CHECKING:
    from .model import OpInfo, RunInfo, StepInfo
    from .protocols import CaptureAdapter, QueryMethod, Store, WorkflowGraph

ENTRY_POINT_GROUP = "provplug"
DISABLE_AUTOLOAD_ENV = "PROVPLUG_DISABLE_PLUGIN_AUTOLOAD"
BLOCK_ENV = "PROVPLUG_BLOCK_PLUGINS"

# Core behaviour, registered through the same hookimpl path as any plugin.
BUILTIN_PLUGINS: tuple[str, ...] = ("provplug.store", "provplug.query.methods", "provplug.index.autosplit")

T = TypeVar("T")


def make_plugin_manager(
    *, autoload: bool | None = None, blocked: Iterable[str] | None = None
) -> pluggy.PluginManager:
    """Build a manager: built-ins, then ``provplug`` entry points, then check.

    ``autoload`` defaults to true unless ``PROVPLUG_DISABLE_PLUGIN_AUTOLOAD=1``;
    ``blocked`` (default: comma-separated ``PROVPLUG_BLOCK_PLUGINS``) names
    plugins, built-in or entry point, that must not be registered.
    """
    if autoload is None:
        autoload = os.environ.get(DISABLE_AUTOLOAD_ENV, "") not in ("1", "true", "yes")
    if blocked is None:
        blocked = [b.strip() for b in os.environ.get(BLOCK_ENV, "").split(",") if b.strip()]
    pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
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


def _collect(register_hook: Callable[..., Any]) -> list[Any]:
    items: list[Any] = []
    register_hook(register=items.append)
    return items


class Plugins:
    """Typed access to the hooks (the only caller of ``pm.hook``)."""

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self.pm = pm

    @classmethod
    def load(cls, **kwargs: Any) -> Plugins:
        return cls(make_plugin_manager(**kwargs))

    # -- discovery -----------------------------------------------------------
    def adapters(self) -> list[CaptureAdapter]:
        return _collect(self.pm.hook.provplug_register_adapters)

    def adapter_for(self, engine: object) -> CaptureAdapter:
        for adapter in self.adapters():
            if adapter.accepts(engine):
                return adapter
        raise PluginError(
            f"no capture adapter accepts a {type(engine).__name__} "
            f"(loaded: {', '.join(a.name for a in self.adapters()) or 'none'})"
        )

    def query_methods(self) -> dict[str, QueryMethod]:
        return {m.name: m for m in _collect(self.pm.hook.provplug_register_query_methods)}

    def store(self, uri: str) -> Store:
        store = self.pm.hook.provplug_store_backend(uri=uri)
        if store is None:
            raise PluginError(f"no store backend accepts {uri!r}")
        return store  # type: ignore[no-any-return]

    def choose_splits(self, workflow: WorkflowGraph, stats: Mapping[str, Any]) -> list[Any] | None:
        return self.pm.hook.provplug_choose_splits(workflow=workflow, stats=stats)  # type: ignore[no-any-return]

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
                    "distribution": _dist_label(dist) if dist else "provplug (built-in)",
                    "hooks": ", ".join(
                        sorted(h.name for h in self.pm.get_hookcallers(plugin) or [])
                    ),
                }
            )
        return rows


def _dist_label(dist: metadata.Distribution) -> str:
    return f"{dist.metadata['Name']} {dist.version}"


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
