"""provplug's Apache Beam capture adapter (found through the ``provplug`` entry point)."""
