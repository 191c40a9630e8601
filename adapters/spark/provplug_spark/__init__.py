"""provplug's PySpark capture adapter (found through the ``provplug`` entry point)."""
