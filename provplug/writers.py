"""Deprecated path: use :mod:`provplug.plugin.writers`. Kept for one release so that
plugins written against provplug 0.1 still import; it will be removed."""

import importlib
import warnings

_moved = importlib.import_module("provplug.plugin.writers")
globals().update({name: value for name, value in vars(_moved).items() if not name.startswith("__")})
warnings.warn("provplug.writers is deprecated: import provplug.plugin.writers", DeprecationWarning, stacklevel=2)
