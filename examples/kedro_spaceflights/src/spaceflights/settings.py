"""Project settings (Kedro's defaults, plus the SparkSession hook and its config pattern).

Nothing here mentions provplug: installing ``provplug[kedro]`` registers its
hooks through the ``kedro.hooks`` entry point, and they capture only when a
store is configured (``PROVPLUG_STORE``, or ``provplug: {store: ...}`` in the
parameters).
"""

from spaceflights.hooks import SparkHooks

HOOKS = (SparkHooks(),)

CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
    "config_patterns": {
        "spark": ["spark*", "spark*/**"],
    },
}
