"""The two pluggy markers of the ``provplug`` project, and nothing else.

They live apart from :mod:`provplug.plugin.hookspecs` (which names the protocol
types the hooks exchange) so that any module, built-in plugin or third-party
one, can decorate hook implementations without importing the rest of
provplug: this module imports pluggy only.

``provplug.hookimpl`` is the public name of :data:`hookimpl`.
"""

from __future__ import annotations

import pluggy

PROJECT_NAME = "provplug"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
