"""Everything a plugin author reads: the markers, the hook specifications, the
protocols between provplug and its plugins, and the plugin manager wrapper."""
