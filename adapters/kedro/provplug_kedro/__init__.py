"""provplug for Kedro: ``kedro run`` captures provenance when a store is configured.

Installed with ``provplug[kedro]``; Kedro loads :data:`provplug_kedro.hooks.hooks`
through the ``kedro.hooks`` entry point. See :mod:`provplug_kedro.hooks`.
"""
