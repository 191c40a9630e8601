"""Deprecated path: use :mod:`provplug.plugin.manager`. Kept for one release so that
plugins written against provplug 0.1 still import; it will be removed."""

import importlib
import warnings

_moved = importlib.import_module("provplug.plugin.manager")
globals().update({name: value for name, value in vars(_moved).items() if not name.startswith("__")})
warnings.warn("provplug.plugins is deprecated: import provplug.plugin.manager", DeprecationWarning, stacklevel=2)
