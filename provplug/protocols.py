"""Deprecated path: use :mod:`provplug.plugin.protocols`. Kept for one release so that
plugins written against provplug 0.1 still import; it will be removed."""

import importlib
import warnings

_moved = importlib.import_module("provplug.plugin.protocols")
globals().update({name: value for name, value in vars(_moved).items() if not name.startswith("__")})
warnings.warn("provplug.protocols is deprecated: import provplug.plugin.protocols", DeprecationWarning, stacklevel=2)
